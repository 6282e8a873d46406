//! Each share's metadata cache (braid-fs `meta/cache.rs`) as the admin
//! API (`/api/v1/shares`, `"metadata_cache"`) and `/metrics`
//! (`braid_metadata_cache_*{share="..."}`) show it.

use std::fmt::Write;

use serde::Serialize;

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
    MetadataCacheView {
        enabled: true,
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
    let families: [Family; 11] = [
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
