//! `braid bench compare`: the same profiles against several targets or
//! settings, interleaved (A B A B) so that drift of a busy machine hits
//! every variant alike; medians per case; JSON and a self-contained HTML
//! report with inline SVG charts (IOPS and throughput per I/O size).

use crate::profiles::Profile;
use crate::report::Report;
use crate::spec::{size_name, Protocol, Security, Spec};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

/// One target/setting combination.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Variant {
    pub label: String,
    pub target: String,
    pub user: String,
    #[serde(skip_serializing, default)]
    pub password: String,
    pub channels: u32,
    pub multichannel: bool,
    pub security: Security,
    #[serde(default)]
    pub connect_to: Vec<String>,
    /// NFS targets: connections per address (nconnect).
    #[serde(default = "one")]
    pub nconnect: u32,
    /// The server's process, when it runs on this machine: its CPU per GiB
    /// and per operation go into the report.
    #[serde(default)]
    pub server_pid: Option<u32>,
}

fn one() -> u32 {
    1
}

impl Variant {
    pub fn spec(&self, p: &Profile) -> Spec {
        let mut s = Spec::default();
        p.apply(&mut s);
        s.target = self.target.clone();
        s.user = self.user.clone();
        s.password = self.password.clone();
        s.channels = self.channels;
        s.multichannel = self.multichannel;
        s.security = self.security;
        s.connect_to = self.connect_to.clone();
        s.nconnect = self.nconnect;
        s.server_pid = self.server_pid;
        s
    }

    /// "4 channel(s) per interface, multichannel, sign" or "nconnect 4".
    pub fn describe(&self) -> String {
        match Protocol::of(&self.target) {
            Protocol::Nfs => format!("NFSv4.1, nconnect {}", self.nconnect),
            Protocol::Smb => format!(
                "{} channel(s) per interface{} &middot; {}",
                self.channels,
                if self.multichannel {
                    ", multichannel"
                } else {
                    ""
                },
                self.security.name()
            ),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunSummary {
    pub iops: f64,
    pub mib_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub errors: u64,
    pub channels: usize,
    /// MiB/s (sent + received) per channel, and its remote address.
    pub per_channel: Vec<(String, f64)>,
    /// The server's CPU seconds per GiB and microseconds per operation
    /// (when its pid was given).
    #[serde(default)]
    pub server_cpu_s_per_gib: Option<f64>,
    #[serde(default)]
    pub server_cpu_us_per_op: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Case {
    pub profile: String,
    pub family: String,
    pub io_size: u32,
    pub variant: String,
    /// Medians over the runs.
    pub iops: f64,
    pub mib_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Medians of the runs' server CPU, when measured.
    #[serde(default)]
    pub server_cpu_s_per_gib: Option<f64>,
    #[serde(default)]
    pub server_cpu_us_per_op: Option<f64>,
    pub runs: Vec<RunSummary>,
    pub failures: Vec<String>,
    /// The full reports behind the summary.
    pub reports: Vec<Report>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CompareResult {
    pub title: String,
    pub created_unix: u64,
    pub host: String,
    pub reps: u32,
    pub variants: Vec<Variant>,
    pub cases: Vec<Case>,
    pub notes: Vec<String>,
}

pub fn median_of(v: Vec<f64>) -> f64 {
    median(v)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn summarize(r: &Report) -> RunSummary {
    RunSummary {
        iops: r.total.iops,
        mib_s: r.total.mib_s,
        p50_us: r.total.latency_us.p50,
        p99_us: r.total.latency_us.p99,
        errors: r.total.errors,
        channels: r.channels.len(),
        per_channel: r
            .channels
            .iter()
            .map(|c| (c.remote.clone(), c.mib_s))
            .collect(),
        server_cpu_s_per_gib: r
            .server_cpu
            .as_ref()
            .filter(|c| c.seconds_per_gib > 0.0)
            .map(|c| c.seconds_per_gib),
        server_cpu_us_per_op: r.server_cpu.as_ref().map(|c| c.us_per_op),
    }
}

/// The median of the values the runs have, if any has one.
fn median_some(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = v.flatten().collect();
    (!v.is_empty()).then(|| median(v))
}

impl Case {
    fn finish(&mut self) {
        self.iops = median(self.runs.iter().map(|r| r.iops).collect());
        self.mib_s = median(self.runs.iter().map(|r| r.mib_s).collect());
        self.p50_us = median(self.runs.iter().map(|r| r.p50_us).collect());
        self.p99_us = median(self.runs.iter().map(|r| r.p99_us).collect());
        self.server_cpu_s_per_gib = median_some(self.runs.iter().map(|r| r.server_cpu_s_per_gib));
        self.server_cpu_us_per_op = median_some(self.runs.iter().map(|r| r.server_cpu_us_per_op));
    }
}

/// Run every profile against every variant, `reps` times, interleaved:
/// for each profile, rep 1 of A, B, ..., then rep 2 of A, B, ...
pub async fn run(
    title: &str,
    profiles: &[Profile],
    variants: &[Variant],
    reps: u32,
    overrides: impl Fn(&mut Spec) -> Result<(), String>,
    progress: bool,
) -> Result<CompareResult, String> {
    let mut cases = Vec::new();
    let total = profiles.len() * variants.len() * reps.max(1) as usize;
    let mut n = 0;
    for p in profiles {
        let mut row: Vec<Case> = variants
            .iter()
            .map(|v| Case {
                profile: p.name.clone(),
                family: p.family.clone(),
                variant: v.label.clone(),
                ..Default::default()
            })
            .collect();
        for _ in 0..reps.max(1) {
            for (v, case) in variants.iter().zip(row.iter_mut()) {
                n += 1;
                let mut s = v.spec(p);
                overrides(&mut s)?;
                case.io_size = s.io_size;
                if progress {
                    eprintln!("[{n}/{total}] {} on {}", p.name, v.label);
                }
                match crate::engine::run(&s, progress).await {
                    Ok(r) => {
                        case.runs.push(summarize(&r));
                        case.reports.push(r);
                    }
                    Err(e) => {
                        if progress {
                            eprintln!("  failed: {e}");
                        }
                        case.failures.push(e);
                    }
                }
            }
        }
        for mut c in row {
            c.finish();
            cases.push(c);
        }
    }
    Ok(CompareResult {
        title: title.to_string(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        host: hostname(),
        reps,
        variants: variants.to_vec(),
        cases,
        notes: Vec::new(),
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Families in order of first appearance.
fn families(r: &CompareResult) -> Vec<String> {
    let mut f: Vec<String> = Vec::new();
    for c in &r.cases {
        if !f.contains(&c.family) {
            f.push(c.family.clone());
        }
    }
    f
}

fn variant_labels(r: &CompareResult) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for c in &r.cases {
        if !v.contains(&c.variant) {
            v.push(c.variant.clone());
        }
    }
    v
}

/// Plain-text table: median IOPS, MiB/s, p99 and the ratio to the first
/// variant; with the servers' pids, their CPU per GiB and per operation and
/// the CPU-per-GiB ratio to the first variant (lower is cheaper).
pub fn summary_text(r: &CompareResult) -> String {
    let mut o = String::new();
    let labels = variant_labels(r);
    let cpu = has_server_cpu(r);
    let _ = write!(
        o,
        "{:<26} {:<22} {:>10} {:>10} {:>10} {:>8}",
        "profile", "variant", "IOPS", "MiB/s", "p99 us", "ratio"
    );
    if cpu {
        let _ = write!(
            o,
            " {:>10} {:>10} {:>9}",
            "CPU s/GiB", "CPU us/op", "CPU ratio"
        );
    }
    o.push('\n');
    let mut profiles: Vec<&str> = Vec::new();
    for c in &r.cases {
        if !profiles.contains(&c.profile.as_str()) {
            profiles.push(&c.profile);
        }
    }
    for p in profiles {
        let first = r
            .cases
            .iter()
            .find(|c| c.profile == p && Some(&c.variant) == labels.first());
        let base = first.map(|c| c.iops).unwrap_or(0.0);
        for c in r.cases.iter().filter(|c| c.profile == p) {
            let ratio = if base > 0.0 { c.iops / base } else { 0.0 };
            let _ = write!(
                o,
                "{:<26} {:<22} {:>10.0} {:>10.1} {:>10.0} {:>7.2}x",
                c.profile, c.variant, c.iops, c.mib_s, c.p99_us, ratio,
            );
            if cpu {
                let _ = write!(
                    o,
                    " {:>10} {:>10} {:>9}",
                    opt(c.server_cpu_s_per_gib, 3),
                    opt(c.server_cpu_us_per_op, 1),
                    cpu_ratio(c, first)
                );
            }
            if !c.failures.is_empty() {
                let _ = write!(o, "  ({} failed)", c.failures.len());
            }
            o.push('\n');
        }
    }
    o
}

fn has_server_cpu(r: &CompareResult) -> bool {
    r.cases.iter().any(|c| c.server_cpu_us_per_op.is_some())
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| format!("{x:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// This case's server CPU per GiB over the first variant's (per operation
/// when no bytes moved, as in metadata loops).
fn cpu_ratio(c: &Case, first: Option<&Case>) -> String {
    let Some(f) = first else {
        return "-".into();
    };
    let pick = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    pick(c.server_cpu_s_per_gib, f.server_cpu_s_per_gib)
        .or_else(|| pick(c.server_cpu_us_per_op, f.server_cpu_us_per_op))
        .map(|x| format!("{x:.2}x"))
        .unwrap_or_else(|| "-".into())
}

const COLORS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fmt_num(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 10_000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A grouped bar chart as inline SVG.
pub fn bar_chart(
    title: &str,
    unit: &str,
    cats: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    let (w, h) = (560.0f64, 300.0f64);
    let (ml, mr, mt, mb) = (60.0, 10.0, 30.0, 60.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    // A "nice" axis maximum.
    let mag = 10f64.powf(max.log10().floor());
    let top = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|t| *t >= max)
        .unwrap_or(max);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="13" font-weight="bold">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    for i in 0..=4 {
        let v = top * i as f64 / 4.0;
        let y = mt + ph - ph * i as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{ml}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            ml + pw,
            ml - 4.0,
            y + 4.0,
            fmt_num(v)
        );
    }
    let _ = write!(
        s,
        r#"<text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        mt + ph / 2.0,
        mt + ph / 2.0,
        esc(unit)
    );
    let nc = cats.len().max(1) as f64;
    let gw = pw / nc;
    let ns = series.len().max(1) as f64;
    let bw = (gw * 0.8 / ns).min(60.0);
    for (ci, cat) in cats.iter().enumerate() {
        let gx = ml + gw * ci as f64 + (gw - bw * ns) / 2.0;
        for (si, (_, vals)) in series.iter().enumerate() {
            let v = vals.get(ci).copied().unwrap_or(0.0);
            let bh = ph * v / top;
            let x = gx + bw * si as f64;
            let y = mt + ph - bh;
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                (bw - 2.0).max(1.0),
                COLORS[si % COLORS.len()],
                esc(&series[si].0),
                fmt_num(v)
            );
            if bw >= 22.0 {
                let _ = write!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                    x + (bw - 2.0) / 2.0,
                    y - 3.0,
                    fmt_num(v)
                );
            }
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            ml + gw * ci as f64 + gw / 2.0,
            mt + ph + 15.0,
            esc(cat)
        );
    }
    // Legend.
    let mut lx = ml;
    let ly = h - 18.0;
    for (si, (name, _)) in series.iter().enumerate() {
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 9.0,
            COLORS[si % COLORS.len()],
            lx + 14.0,
            esc(name)
        );
        lx += 24.0 + 6.5 * name.len() as f64;
    }
    s.push_str("</svg>");
    s
}

/// The self-contained HTML report.
pub fn html(r: &CompareResult) -> String {
    let labels = variant_labels(r);
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>{t}</title><style>
body{{font-family:sans-serif;margin:24px;color:#222;max-width:1180px}}
h1{{font-size:20px}} h2{{font-size:16px;margin-top:28px;border-bottom:1px solid #ccc}}
.charts{{display:flex;flex-wrap:wrap;gap:12px}}
table{{border-collapse:collapse;font-size:12px;margin-top:8px}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} td:first-child,td:nth-child(2),th{{text-align:left}}
.meta{{color:#555;font-size:12px}} .bad{{color:#b00}}
</style></head><body><h1>{t}</h1>"#,
        t = esc(&r.title)
    );
    let _ = write!(
        o,
        r#"<p class="meta">host {} &middot; {} repetition(s) per case, run interleaved (A B A B) &middot; medians shown &middot; generated by braid bench compare</p><ul class="meta">"#,
        esc(&r.host),
        r.reps
    );
    for v in &r.variants {
        let _ = write!(
            o,
            "<li><b>{}</b>: {} &middot; {}</li>",
            esc(&v.label),
            esc(&v.target),
            v.describe()
        );
    }
    o.push_str("</ul>");
    for n in &r.notes {
        let _ = write!(o, "<p class=\"meta\">{}</p>", esc(n));
    }
    for fam in families(r) {
        let cases: Vec<&Case> = r.cases.iter().filter(|c| c.family == fam).collect();
        let mut sizes: Vec<u32> = Vec::new();
        for c in &cases {
            if !sizes.contains(&c.io_size) {
                sizes.push(c.io_size);
            }
        }
        sizes.sort_unstable();
        let cats: Vec<String> = sizes.iter().map(|s| size_name(*s as u64)).collect();
        let series = |f: &dyn Fn(&Case) -> f64| -> Vec<(String, Vec<f64>)> {
            labels
                .iter()
                .map(|l| {
                    (
                        l.clone(),
                        sizes
                            .iter()
                            .map(|s| {
                                cases
                                    .iter()
                                    .find(|c| &c.variant == l && c.io_size == *s)
                                    .map(|c| f(c))
                                    .unwrap_or(0.0)
                            })
                            .collect(),
                    )
                })
                .collect()
        };
        let _ = write!(o, "<h2>{}</h2><div class=\"charts\">", esc(&fam));
        o.push_str(&bar_chart(
            &format!("{fam}: IOPS per I/O size"),
            "IOPS",
            &cats,
            &series(&|c| c.iops),
        ));
        o.push_str(&bar_chart(
            &format!("{fam}: throughput per I/O size"),
            "MiB/s",
            &cats,
            &series(&|c| c.mib_s),
        ));
        let cpu = has_server_cpu(r);
        let _ = write!(
            o,
            "</div><table><tr><th>profile</th><th>variant</th><th>IOPS</th><th>MiB/s</th><th>p50 µs</th><th>p99 µs</th><th>vs first</th>{}<th>channels (MiB/s each)</th><th>runs</th></tr>",
            if cpu {
                "<th>server CPU s/GiB</th><th>server CPU µs/op</th><th>CPU vs first</th>"
            } else {
                ""
            }
        );
        for c in &cases {
            let first = cases
                .iter()
                .find(|b| b.profile == c.profile && Some(&b.variant) == labels.first())
                .copied();
            let base = first.map(|b| b.iops).unwrap_or(0.0);
            let cpu_cells = if cpu {
                format!(
                    "<td>{}</td><td>{}</td><td>{}</td>",
                    opt(c.server_cpu_s_per_gib, 3),
                    opt(c.server_cpu_us_per_op, 1),
                    cpu_ratio(c, first)
                )
            } else {
                String::new()
            };
            let chans = c
                .runs
                .last()
                .map(|r| {
                    r.per_channel
                        .iter()
                        .map(|(a, m)| format!("{a}: {m:.0}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.1}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td>{}<td>{}</td><td>{}{}</td></tr>",
                esc(&c.profile),
                esc(&c.variant),
                c.iops,
                c.mib_s,
                c.p50_us,
                c.p99_us,
                if base > 0.0 { format!("{:.2}x", c.iops / base) } else { "-".into() },
                cpu_cells,
                esc(&chans),
                c.runs.len(),
                if c.failures.is_empty() {
                    String::new()
                } else {
                    format!(" <span class=\"bad\" title=\"{}\">({} failed)</span>", esc(&c.failures.join("; ")), c.failures.len())
                }
            );
        }
        o.push_str("</table>");
    }
    let json = serde_json::to_string(r)
        .unwrap_or_default()
        .replace("</", "<\\/");
    let _ = write!(
        o,
        r#"<script type="application/json" id="data">{json}</script></body></html>"#
    );
    o
}

/// Write `compare.json` and `compare.html` into `dir`.
pub fn write(r: &CompareResult, dir: &Path) -> Result<(), String> {
    write_named(r, dir, "compare")
}

pub fn write_named(r: &CompareResult, dir: &Path, stem: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let j = dir.join(format!("{stem}.json"));
    std::fs::write(&j, serde_json::to_string_pretty(r).unwrap_or_default())
        .map_err(|e| format!("{}: {e}", j.display()))?;
    let h = dir.join(format!("{stem}.html"));
    std::fs::write(&h, html(r)).map_err(|e| format!("{}: {e}", h.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_is_svg() {
        let s = bar_chart(
            "t",
            "IOPS",
            &["4k".into(), "1m".into()],
            &[("a".into(), vec![10.0, 20.0]), ("b".into(), vec![5.0, 0.0])],
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches("<rect").count(), 4 + 2);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }

    fn case(variant: &str, cpu_per_gib: &[f64]) -> Case {
        let mut c = Case {
            profile: "p".into(),
            family: "f".into(),
            io_size: 1 << 20,
            variant: variant.into(),
            runs: cpu_per_gib
                .iter()
                .map(|g| RunSummary {
                    iops: 100.0,
                    mib_s: 100.0,
                    server_cpu_s_per_gib: Some(*g),
                    server_cpu_us_per_op: Some(g * 1000.0),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        c.finish();
        c
    }

    #[test]
    fn server_cpu_medians_and_ratio_to_the_first_variant() {
        let r = CompareResult {
            cases: vec![
                case("braid", &[0.2, 0.4, 0.3]),
                case("ganesha", &[0.9, 0.6]),
            ],
            ..Default::default()
        };
        assert_eq!(r.cases[0].server_cpu_s_per_gib, Some(0.3));
        assert_eq!(r.cases[1].server_cpu_s_per_gib, Some(0.75));
        let t = summary_text(&r);
        assert!(t.contains("CPU s/GiB"), "{t}");
        let ganesha = t.lines().find(|l| l.contains("ganesha")).unwrap();
        assert!(
            ganesha.contains("0.750") && ganesha.contains("2.50x"),
            "{ganesha}"
        );
        assert!(html(&r).contains("server CPU s/GiB"));

        let without = CompareResult {
            cases: vec![case("braid", &[])],
            ..Default::default()
        };
        assert_eq!(without.cases[0].server_cpu_s_per_gib, None);
        assert!(!summary_text(&without).contains("CPU"));
    }
}
