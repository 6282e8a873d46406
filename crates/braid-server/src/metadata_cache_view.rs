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
}

/// The share `name`'s cache; all zero and not enabled when it has none.
pub fn view(state: &ServerState, name: &str) -> MetadataCacheView {
    let Some(stats) = state.share(name).and_then(|s| s.fs.metadata_cache_stats()) else {
        return MetadataCacheView::default();
    };
    MetadataCacheView {
        enabled: true,
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
    let families: [Family; 6] = [
        ("hits_total", "counter", "Case-insensitive lookups answered from the metadata cache with a name found.", |v| v.hits),
        ("negative_hits_total", "counter", "Lookups answered from the metadata cache with no such name, without reading the directory.", |v| v.negative_hits),
        ("misses_total", "counter", "Lookups the metadata cache could not answer (the directory was read).", |v| v.misses),
        ("invalidations_total", "counter", "Cached names re-read or directories dropped because something changed.", |v| v.invalidations),
        ("entries", "gauge", "Names held by the metadata cache.", |v| v.entries),
        ("bytes", "gauge", "Estimated memory held by the metadata cache.", |v| v.bytes),
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
