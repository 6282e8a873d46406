//! Each share's metadata cache (braid-fs `meta/cache.rs`) as the admin
//! API (`/api/v1/shares`, `"metadata_cache"`) and `/metrics`
//! (`braid_metadata_cache_*{share="..."}`) show it.

use std::fmt::Write;

use serde::Serialize;

use braid_fs::meta::FdStats;

use crate::state::ServerState;

#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct MetadataCacheView {
    pub enabled: bool,
    /// Case-insensitive lookups answered from the cache, name found.
    pub hits: u64,
    /// Lookups the cache could not answer (the directory was read).
    pub misses: u64,
    /// Lookups answered from the cache with no such name, without a scan.
    pub negative_hits: u64,
    pub entries: u64,
    pub bytes: u64,
    pub invalidations: u64,
    /// The attribute layer (braid-fs `meta/attr_cache.rs`): reads of a
    /// file's DOS record, descriptor or birth time answered from it.
    pub attr_hits: u64,
    /// Reads of those that went to the file system.
    pub attr_misses: u64,
    /// Kept entries dropped because their file's change time moved.
    pub attr_invalidations: u64,
    /// Files whose metadata is kept now.
    pub attr_files: u64,
    pub attr_bytes: u64,
    /// Kept fds (braid-fs `meta/fd_cache.rs`), the SMB face's and the NFS
    /// export's together: fds parked at a close.
    pub fd_kept: u64,
    /// Opens that took a kept fd instead of opening the file.
    pub fd_reused: u64,
    /// Opens of a plain file that found none.
    pub fd_missed: u64,
    pub fd_dropped_idle: u64,
    pub fd_dropped_capacity: u64,
    /// Its file was deleted (by Braid, or seen by the sweep).
    pub fd_dropped_unlinked: u64,
    /// Dropped before a host lease request or with the share.
    pub fd_dropped_invalidated: u64,
    /// The caller of the open that found it failed the permission check.
    pub fd_dropped_refused: u64,
    /// Fds kept now.
    pub fd_open: u64,
}

/// The share `name`'s cache; all zero and not enabled when it has none.
pub fn view(state: &ServerState, name: &str) -> MetadataCacheView {
    let Some(stats) = state.share(name).and_then(|s| s.fs.metadata_cache_stats()) else {
        return MetadataCacheView::default();
    };
    let attrs = state
        .share(name)
        .and_then(|s| s.fs.attr_cache_stats())
        .unwrap_or_default();
    let share = state.share(name);
    let fds = [
        share.as_ref().and_then(|s| s.fs.fd_cache()),
        state.nfs_fd_cache(name),
    ]
    .into_iter()
    .flatten()
    .map(|c| c.stats())
    .fold(FdStats::default(), |a, b| FdStats {
        kept: a.kept + b.kept,
        reused: a.reused + b.reused,
        missed: a.missed + b.missed,
        dropped_idle: a.dropped_idle + b.dropped_idle,
        dropped_capacity: a.dropped_capacity + b.dropped_capacity,
        dropped_unlinked: a.dropped_unlinked + b.dropped_unlinked,
        dropped_invalidated: a.dropped_invalidated + b.dropped_invalidated,
        dropped_refused: a.dropped_refused + b.dropped_refused,
        open: a.open + b.open,
    });
    MetadataCacheView {
        enabled: true,
        fd_kept: fds.kept,
        fd_reused: fds.reused,
        fd_missed: fds.missed,
        fd_dropped_idle: fds.dropped_idle,
        fd_dropped_capacity: fds.dropped_capacity,
        fd_dropped_unlinked: fds.dropped_unlinked,
        fd_dropped_invalidated: fds.dropped_invalidated,
        fd_dropped_refused: fds.dropped_refused,
        fd_open: fds.open,
        attr_hits: attrs.hits,
        attr_misses: attrs.misses,
        attr_invalidations: attrs.invalidations,
        attr_files: attrs.files,
        attr_bytes: attrs.bytes,
        hits: stats.hits,
        misses: stats.misses,
        negative_hits: stats.negative_hits,
        entries: stats.entries,
        bytes: stats.bytes,
        invalidations: stats.invalidations,
    }
}

/// A metric family: name suffix, type, help and the value it shows.
type Family = (
    &'static str,
    &'static str,
    &'static str,
    fn(&MetadataCacheView) -> u64,
);

/// The `braid_metadata_cache_*` families, one series per share with a
/// cache, in Prometheus text format 0.0.4.
pub fn render_prometheus(state: &ServerState) -> String {
    let config = state.config();
    let views: Vec<(String, MetadataCacheView)> = config
        .shares
        .iter()
        .map(|s| {
            (
                s.name.replace('\\', "\\\\").replace('"', "\\\""),
                view(state, &s.name),
            )
        })
        .filter(|(_, v)| v.enabled)
        .collect();
    let families: [Family; 20] = [
        ("hits_total", "counter", "Case-insensitive lookups answered from the metadata cache with a name found.", |v| v.hits),
        ("negative_hits_total", "counter", "Lookups answered from the metadata cache with no such name, without reading the directory.", |v| v.negative_hits),
        ("misses_total", "counter", "Lookups the metadata cache could not answer (the directory was read).", |v| v.misses),
        ("invalidations_total", "counter", "Cached names re-read or directories dropped because something changed.", |v| v.invalidations),
        ("entries", "gauge", "Names held by the metadata cache.", |v| v.entries),
        ("bytes", "gauge", "Estimated memory held by the metadata cache.", |v| v.bytes),
        ("attr_hits_total", "counter", "Reads of a file's DOS record, security descriptor or birth time answered from the metadata cache.", |v| v.attr_hits),
        ("attr_misses_total", "counter", "Reads of a file's DOS record, security descriptor or birth time that went to the file system.", |v| v.attr_misses),
        ("attr_invalidations_total", "counter", "Kept file metadata dropped because the file's change time moved.", |v| v.attr_invalidations),
        ("attr_files", "gauge", "Files whose metadata the metadata cache keeps.", |v| v.attr_files),
        ("attr_bytes", "gauge", "Estimated memory held by the metadata cache's per-file metadata.", |v| v.attr_bytes),
        ("fd_kept_total", "counter", "File descriptors kept at a close for the opens that follow.", |v| v.fd_kept),
        ("fd_reused_total", "counter", "Opens that took a kept file descriptor instead of opening the file.", |v| v.fd_reused),
        ("fd_missed_total", "counter", "Opens of a plain file that found no kept file descriptor to take.", |v| v.fd_missed),
        ("fd_dropped_idle_total", "counter", "Kept file descriptors closed after the idle time.", |v| v.fd_dropped_idle),
        ("fd_dropped_capacity_total", "counter", "Kept file descriptors closed because the bound was reached.", |v| v.fd_dropped_capacity),
        ("fd_dropped_unlinked_total", "counter", "Kept file descriptors closed because their file was deleted.", |v| v.fd_dropped_unlinked),
        ("fd_dropped_invalidated_total", "counter", "Kept file descriptors closed before a host lease request or with their share.", |v| v.fd_dropped_invalidated),
        ("fd_dropped_refused_total", "counter", "Kept file descriptors closed because the opener failed the permission check.", |v| v.fd_dropped_refused),
        ("fd_open", "gauge", "File descriptors kept now.", |v| v.fd_open),
    ];
    let mut out = String::new();
    for (suffix, kind, help, value) in families {
        let name = format!("braid_metadata_cache_{suffix}");
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (share, v) in &views {
            let _ = writeln!(out, "{name}{{share=\"{share}\"}} {}", value(v));
        }
    }
    out
}
