//! `braid bench ...` and `braid lab ...`: the command line of the load
//! generator (crates/braid-bench).

use braid_bench::compare::{self, Variant};
use braid_bench::profiles::{self, Profile};
use braid_bench::spec::{parse_size, Mode, Protocol, Security, Spec};
use braid_bench::{lab, Report};
use clap::Subcommand;
use std::path::PathBuf;

/// `braid bench`: run a profile or explicit load against an SMB or NFSv4.1 server.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: Option<BenchCmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// List the named profiles.
    Profiles,
    /// Run profiles against several targets/settings, interleaved, into an
    /// HTML report and its JSON.
    Compare(Box<CompareArgs>),
}

/// Load shape flags; each one overrides the profile's value.
#[derive(clap::Args, Clone, Default)]
pub struct LoadArgs {
    /// Named profile (see `braid bench profiles`).
    #[arg(long, short = 'p')]
    pub profile: Option<String>,
    /// Measured seconds.
    #[arg(long, short = 'd')]
    pub duration: Option<f64>,
    /// Warm-up seconds (discarded).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// I/O size, e.g. 4k, 64k, 1m.
    #[arg(long, short = 'b')]
    pub io_size: Option<String>,
    /// Pattern: read, write, randread, randwrite, rw, randrw.
    #[arg(long)]
    pub rw: Option<String>,
    /// Percentage of reads in a mixed load (with rw / randrw).
    #[arg(long)]
    pub read_pct: Option<u8>,
    /// Threads (load streams).
    #[arg(long, short = 't')]
    pub threads: Option<u32>,
    /// Requests in flight per thread.
    #[arg(long, short = 'o', visible_alias = "iodepth")]
    pub queue_depth: Option<u32>,
    /// Number of files.
    #[arg(long)]
    pub files: Option<u32>,
    /// Size of each file, e.g. 64m, 1g.
    #[arg(long)]
    pub file_size: Option<String>,
    /// Metadata loops instead of I/O.
    #[arg(long)]
    pub metadata: bool,
    /// Metadata mode: files cycled through per task.
    #[arg(long)]
    pub md_files: Option<u32>,
    /// Check read data against the written pattern.
    #[arg(long)]
    pub verify: bool,
    /// Directory in the share for the bench files.
    #[arg(long)]
    pub dir: Option<String>,
}

#[derive(clap::Args, Clone)]
pub struct RunArgs {
    /// //HOST[:PORT]/SHARE (SMB) or nfs://HOST[:PORT]/EXPORT (NFSv4.1).
    #[arg(long)]
    target: Option<String>,
    #[arg(long, short = 'u')]
    user: Option<String>,
    /// Password (or BRAID_PASSWORD in the environment).
    #[arg(long)]
    password: Option<String>,
    #[arg(long, default_value = "")]
    domain: String,
    #[command(flatten)]
    load: LoadArgs,
    /// Connections per server interface (1..16); more than 1 turns
    /// multichannel on.
    #[arg(long, short = 'c')]
    channels: Option<u32>,
    /// Multichannel: bind channels to every interface the server reports.
    #[arg(long)]
    multichannel: bool,
    /// Open channels to these addresses instead of the server's list
    /// (NFS: more server addresses, trunked into the one session).
    #[arg(long)]
    connect_to: Vec<String>,
    /// NFS: TCP connections per server address, one session (1..16).
    #[arg(long)]
    nconnect: Option<u32>,
    /// NFS: AUTH_SYS uid.
    #[arg(long, default_value_t = 0)]
    uid: u32,
    /// NFS: AUTH_SYS gid.
    #[arg(long, default_value_t = 0)]
    gid: u32,
    /// plain (3.0.2 unsigned), sign (3.1.1 signed) or encrypt.
    #[arg(long, default_value = "sign")]
    security: String,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Also write the JSON report to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// No live progress line on stderr.
    #[arg(long)]
    quiet: bool,
    /// The server's process on this machine: its CPU per GiB and per
    /// operation over the measured window go into the report.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Run the Spec in this JSON file (as `braid lab` does); the password
    /// comes from --password / BRAID_PASSWORD.
    #[arg(long, hide = true)]
    spec: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// LABEL=//HOST[:PORT]/SHARE or LABEL=nfs://HOST[:PORT]/EXPORT (repeatable).
    #[arg(long, required = true)]
    target: Vec<String>,
    /// Credentials of one target: LABEL=USER%PASSWORD (repeatable);
    /// others use --user/--password.
    #[arg(long)]
    cred: Vec<String>,
    #[arg(long, short = 'u', default_value = "")]
    user: String,
    /// Password (or BRAID_PASSWORD in the environment).
    #[arg(long)]
    password: Option<String>,
    /// Profiles: comma-separated names or prefix* globs.
    #[arg(long, default_value = "diskspd-mtmf-read-*")]
    profiles: String,
    /// Channel counts to compare, e.g. 1,4 (more than 1 = multichannel).
    #[arg(long, default_value = "1")]
    channels: String,
    /// Security settings to compare, e.g. plain,sign,encrypt.
    #[arg(long, default_value = "sign")]
    security: String,
    /// NFS targets: nconnect values to compare, e.g. 1,4,16.
    #[arg(long, default_value = "1")]
    nconnect: String,
    /// Repetitions of each case (interleaved A B A B).
    #[arg(long, default_value_t = 2)]
    reps: u32,
    #[command(flatten)]
    load: LoadArgs,
    /// Output directory for compare.json and compare.html.
    #[arg(long, default_value = "bench-report")]
    out: PathBuf,
    /// Report title.
    #[arg(long, default_value = "braid bench compare")]
    title: String,
    /// LABEL=PID of a target's server process on this machine (repeatable):
    /// its CPU per GiB and per operation over each measured window go into
    /// the report (the process and its children, from /proc).
    #[arg(long)]
    server_pid: Vec<String>,
}

/// `braid lab`: a namespaced network with rate-limited NICs (root only).
#[derive(clap::Args)]
pub struct LabArgs {
    /// Server NICs (veth pairs).
    #[arg(long, default_value_t = 2)]
    nics: u32,
    /// Rate of each link (tc tbf), e.g. 800mbit; "none" for no limit.
    #[arg(long, default_value = "800mbit")]
    rate: String,
    /// Profiles to run (names or prefix* globs).
    #[arg(long, default_value = "diskspd-mtmf-read-1m")]
    profiles: String,
    /// Modes to compare: 1 (single channel), multi (one channel per
    /// NIC), N (SMB channels per NIC), ncN (Braid's NFSv4.1 with nconnect
    /// N), gncN (nfs-ganesha in the same namespace, nconnect N).
    #[arg(long, default_value = "1,multi")]
    modes: String,
    /// Cap each TCP connection at this rate (tc htb class per client
    /// port), beside the per-NIC --rate: e.g. 200mbit.
    #[arg(long)]
    flow_rate: Option<String>,
    #[arg(long, default_value_t = 1)]
    reps: u32,
    #[command(flatten)]
    load: LoadArgs,
    /// Where to write lab.json / lab.html.
    #[arg(long, default_value = "lab-report")]
    out: PathBuf,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Leave the namespaces up after the run (for poking around).
    #[arg(long)]
    keep: bool,
}

fn apply_load(s: &mut Spec, l: &LoadArgs) -> Result<(), String> {
    if let Some(p) = &l.profile {
        profiles::find(p)
            .ok_or_else(|| format!("no profile '{p}' (see `braid bench profiles`)"))?
            .apply(s);
    }
    apply_overrides(s, l)
}

fn apply_overrides(s: &mut Spec, l: &LoadArgs) -> Result<(), String> {
    if let Some(v) = l.duration {
        s.duration = v;
    }
    if let Some(v) = l.warmup {
        s.warmup = v;
    }
    if let Some(v) = &l.io_size {
        s.io_size = u32::try_from(parse_size(v)?).map_err(|_| "I/O size too large")?;
    }
    if let Some(rw) = &l.rw {
        let (random, pct) = match rw.as_str() {
            "read" => (false, 100),
            "write" => (false, 0),
            "randread" => (true, 100),
            "randwrite" => (true, 0),
            "rw" | "readwrite" => (false, 50),
            "randrw" => (true, 50),
            o => {
                return Err(format!(
                    "--rw {o}: use read, write, randread, randwrite, rw, randrw"
                ))
            }
        };
        s.random = random;
        s.read_pct = pct;
    }
    if let Some(v) = l.read_pct {
        s.read_pct = v;
    }
    if let Some(v) = l.threads {
        s.threads = v;
    }
    if let Some(v) = l.queue_depth {
        s.queue_depth = v;
    }
    if let Some(v) = l.files {
        s.files = v;
    }
    if let Some(v) = &l.file_size {
        s.file_size = parse_size(v)?;
    }
    if l.metadata {
        s.mode = Mode::Metadata;
    }
    if let Some(v) = l.md_files {
        s.md_files = v;
    }
    if l.verify {
        s.verify = true;
    }
    if let Some(d) = &l.dir {
        s.dir = d.clone();
    }
    Ok(())
}

fn password(flag: &Option<String>) -> String {
    flag.clone()
        .or_else(|| std::env::var("BRAID_PASSWORD").ok())
        .unwrap_or_default()
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting runtime: {e}"))
}

pub fn bench(args: BenchArgs) -> Result<(), String> {
    match args.cmd {
        Some(BenchCmd::Profiles) => {
            for p in profiles::all() {
                println!("{:<26} {}", p.name, p.about);
            }
            Ok(())
        }
        Some(BenchCmd::Compare(c)) => compare_cmd(*c),
        None => run_cmd(args.run),
    }
}

fn run_cmd(a: RunArgs) -> Result<(), String> {
    let mut s = Spec::default();
    if let Some(p) = &a.spec {
        let txt = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        s = serde_json::from_str(&txt).map_err(|e| format!("{}: {e}", p.display()))?;
        s.password = password(&a.password);
        return run_spec(s, &a);
    }
    apply_load(&mut s, &a.load)?;
    s.target = a.target.clone().ok_or(
        "--target //HOST[:PORT]/SHARE or nfs://HOST[:PORT]/EXPORT is required (or `braid bench profiles`)",
    )?;
    s.user = match (Protocol::of(&s.target), a.user.clone()) {
        (_, Some(u)) => u,
        (Protocol::Nfs, None) => String::new(),
        (Protocol::Smb, None) => return Err("--user is required".into()),
    };
    if let Some(n) = a.nconnect {
        s.nconnect = n;
    }
    s.uid = a.uid;
    s.gid = a.gid;
    s.password = password(&a.password);
    s.domain = a.domain.clone();
    if let Some(c) = a.channels {
        s.channels = c;
        if c > 1 {
            s.multichannel = true;
        }
    }
    if a.multichannel || !a.connect_to.is_empty() {
        s.multichannel = true;
    }
    s.connect_to = a.connect_to.clone();
    s.security = Security::parse(&a.security)?;
    s.server_pid = a.server_pid;
    run_spec(s, &a)
}

fn run_spec(s: Spec, a: &RunArgs) -> Result<(), String> {
    s.validate()?;
    let progress = !a.quiet && !a.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    if progress {
        eprintln!("braid bench: {} against {}", s.describe(), s.target);
    }
    let rt = runtime()?;
    let r: Report = rt.block_on(async {
        tokio::select! {
            r = braid_bench::engine::run(&s, progress) => r,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        }
    })?;
    if let Some(p) = &a.out {
        std::fs::write(p, r.to_json()).map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    if a.json {
        println!("{}", r.to_json());
    } else {
        print!("{}", r.to_text());
    }
    if r.verify_errors > 0 {
        return Err(format!("{} verification errors", r.verify_errors));
    }
    if r.total.count == 0 {
        return Err("no operation completed".into());
    }
    Ok(())
}

fn list<T>(s: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(f)
        .collect()
}

fn compare_cmd(c: CompareArgs) -> Result<(), String> {
    let profs: Vec<Profile> = profiles::select(&c.profiles)?;
    let chans = list(&c.channels, |x| {
        x.parse::<u32>()
            .ok()
            .filter(|n| (1..=16).contains(n))
            .ok_or(format!("--channels {x}: use 1..16"))
    })?;
    let secs = list(&c.security, Security::parse)?;
    let ncs = list(&c.nconnect, |x| {
        x.parse::<u32>()
            .ok()
            .filter(|n| (1..=16).contains(n))
            .ok_or(format!("--nconnect {x}: use 1..16"))
    })?;
    let mut targets = Vec::new();
    for t in &c.target {
        let (label, unc) = t
            .split_once('=')
            .ok_or(format!("--target {t}: use LABEL=//HOST[:PORT]/SHARE"))?;
        let (mut user, mut password) = (c.user.clone(), password(&c.password));
        for cr in &c.cred {
            if let Some((l, up)) = cr.split_once('=') {
                if l == label {
                    let (u, p) = up.split_once('%').unwrap_or((up, ""));
                    user = u.into();
                    password = p.into();
                }
            }
        }
        targets.push((label.to_string(), unc.to_string(), user, password));
    }
    let mut pids = std::collections::HashMap::new();
    for sp in &c.server_pid {
        let (label, pid) = sp
            .split_once('=')
            .and_then(|(l, p)| Some((l, p.parse::<u32>().ok()?)))
            .ok_or(format!("--server-pid {sp}: use LABEL=PID"))?;
        if !targets.iter().any(|t| t.0 == label) {
            return Err(format!(
                "--server-pid {sp}: no --target is labelled {label}"
            ));
        }
        pids.insert(label.to_string(), pid);
    }
    let mut variants = Vec::new();
    for (label, unc, user, password) in &targets {
        let server_pid = pids.get(label).copied();
        if Protocol::of(unc) == Protocol::Nfs {
            for &nc in &ncs {
                let mut name = label.clone();
                if ncs.len() > 1 {
                    name += &format!(" nc{nc}");
                }
                variants.push(Variant {
                    label: name,
                    target: unc.clone(),
                    user: user.clone(),
                    password: String::new(),
                    channels: 1,
                    multichannel: false,
                    security: Security::Plain,
                    connect_to: Vec::new(),
                    nconnect: nc,
                    server_pid,
                });
            }
            continue;
        }
        for &ch in &chans {
            for &sec in &secs {
                let mut name = label.clone();
                if chans.len() > 1 {
                    name += &format!(" {ch}ch");
                }
                if secs.len() > 1 {
                    name += &format!(" {}", sec.name());
                }
                variants.push(Variant {
                    label: name,
                    target: unc.clone(),
                    user: user.clone(),
                    password: password.clone(),
                    channels: ch,
                    multichannel: ch > 1,
                    security: sec,
                    connect_to: Vec::new(),
                    nconnect: 1,
                    server_pid,
                });
            }
        }
    }
    let load = c.load.clone();
    let rt = runtime()?;
    let res = rt.block_on(async {
        tokio::select! {
            r = compare::run(&c.title, &profs, &variants, c.reps, |s| apply_overrides(s, &load), std::io::IsTerminal::is_terminal(&std::io::stderr())) => r,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        }
    })?;
    compare::write(&res, &c.out)?;
    println!("{}", compare::summary_text(&res));
    println!(
        "report: {}  data: {}",
        c.out.join("compare.html").display(),
        c.out.join("compare.json").display()
    );
    Ok(())
}

pub fn lab_cmd(a: LabArgs) -> Result<(), String> {
    let profs = profiles::select(&a.profiles)?;
    let opts = lab::LabOptions {
        nics: a.nics,
        rate: if a.rate == "none" {
            None
        } else {
            Some(a.rate.clone())
        },
        modes: a.modes.split(',').map(|s| s.trim().to_string()).collect(),
        reps: a.reps,
        keep: a.keep,
        flow_rate: a.flow_rate.clone(),
        out: a.out.clone(),
        load: {
            let l = a.load.clone();
            Box::new(move |s: &mut Spec| apply_overrides(s, &l))
        },
    };
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let res = lab::run(&exe, &profs, opts)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&res).unwrap_or_default());
    } else {
        println!("{}", compare::summary_text(&res));
        println!("report: {}", a.out.join("lab.html").display());
    }
    Ok(())
}
