//! `braid lab`: a small network made of network namespaces on one machine.
//! A server host with N veth NICs (198.18.i.1/24) and a client host
//! (198.18.i.2/24), each link rate-limited with tc tbf to model a NIC's
//! bandwidth; Braid serves in the server namespace with one
//! `[[interface]]` per NIC, and `braid bench` runs from the client
//! namespace. Everything is torn down on return, on error and on Ctrl-C.
//!
//! With a per-connection cap (`flow_rate`, as a cloud file service caps
//! each TCP connection, not only each NIC), every link gets an htb
//! instead: a parent class at the NIC's rate and one child class per TCP
//! connection at the flow rate. The kernel here has no `flow` classifier,
//! so connections are told apart by the client's port: the client
//! namespace's ephemeral ports are confined to [`FLOW_PORT_BASE`] ..
//! +[`FLOW_PORTS`] and a u32 filter per port (source port on the client's
//! side, destination port on the server's) picks its class. Braid serves
//! SMB on 445 and NFSv4.1 on 2049; modes `ncN` run NFS with nconnect N.
//!
//! Modes `gncN` run the same NFS load against nfs-ganesha (FSAL VFS) in the
//! same server namespace, on port 2050, exporting a directory of its own on
//! the same file system, so Braid and its peer cross the same links, caps and
//! profiles in one report.

use crate::compare::{summarize, Case, CompareResult};
use crate::profiles::Profile;
use crate::report::Report;
use crate::spec::Spec;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub type Overrides = Box<dyn Fn(&mut Spec) -> Result<(), String>>;

pub struct LabOptions {
    pub nics: u32,
    /// tbf rate per link (e.g. "800mbit"), or no limit.
    pub rate: Option<String>,
    /// "1" (single channel), "multi" (one channel per NIC), or a number N
    /// (N channels per NIC).
    pub modes: Vec<String>,
    pub reps: u32,
    pub keep: bool,
    pub out: PathBuf,
    pub load: Overrides,
    /// Per-TCP-connection cap (e.g. "200mbit"), beside the per-NIC rate.
    pub flow_rate: Option<String>,
}

/// The client namespace's first ephemeral port when flows are capped.
pub const FLOW_PORT_BASE: u16 = 40000;
/// Ephemeral ports (= connections) the client namespace may use.
pub const FLOW_PORTS: u16 = 64;

const LAB_USER: &str = "lab";
const LAB_PASSWORD: &str = "lab-password";

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn interrupted() -> Result<(), String> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Whether we run as root (the lab needs CAP_NET_ADMIN and CAP_SYS_ADMIN).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Rate like "800mbit" / "1gbit" in Mbit/s (for the interface speed).
fn rate_mbps(r: &str) -> u64 {
    let l = r.to_ascii_lowercase();
    let num: String = l.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n: u64 = num.parse().unwrap_or(1000);
    if l.ends_with("gbit") {
        n * 1000
    } else if l.ends_with("kbit") {
        (n / 1000).max(1)
    } else {
        n
    }
}

/// The namespaces, links and server of one lab; dropping it tears them down.
pub struct Lab {
    pub server_ns: String,
    pub client_ns: String,
    pub nics: u32,
    workdir: PathBuf,
    server: Option<Child>,
    ganesha: Option<Child>,
    keep: bool,
}

/// nfs-ganesha's port in the server namespace (Braid's NFS is on 2049).
pub const GANESHA_PORT: u16 = 2050;

/// What one lab mode runs: an SMB channel setting, or an NFS server with
/// an nconnect count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// SMB without multichannel.
    SingleChannel,
    /// SMB with one channel per NIC.
    Multichannel,
    /// SMB with N channels per NIC.
    Channels(u32),
    /// Braid's NFSv4.1 server with nconnect N.
    BraidNfs(u32),
    /// nfs-ganesha with nconnect N.
    GaneshaNfs(u32),
}

impl Mode {
    pub fn parse(m: &str) -> Result<Mode, String> {
        let count = |n: &str| -> Result<u32, String> {
            n.parse::<u32>()
                .ok()
                .filter(|c| (1..=16).contains(c))
                .ok_or_else(|| format!("mode '{m}': the count must be 1..16"))
        };
        Ok(match m {
            "1" | "single" => Mode::SingleChannel,
            "multi" => Mode::Multichannel,
            _ if m.starts_with("gnc") => Mode::GaneshaNfs(count(&m[3..])?),
            _ if m.starts_with("nc") => Mode::BraidNfs(count(&m[2..])?),
            n => Mode::Channels(n.parse().map_err(|_| {
                format!("mode '{n}': use 1, multi, a channel count, ncN (Braid NFS) or gncN (nfs-ganesha)")
            })?),
        })
    }

    pub fn label(&self, nics: u32) -> String {
        match self {
            Mode::SingleChannel => "single channel".into(),
            Mode::Multichannel => format!("multichannel ({nics} ch)"),
            Mode::Channels(n) => format!("multichannel ({n} ch/NIC)"),
            Mode::BraidNfs(n) => format!("NFS nconnect {n}"),
            Mode::GaneshaNfs(n) => format!("ganesha NFS nconnect {n}"),
        }
    }
}

impl Lab {
    pub fn server_addr(i: u32) -> String {
        format!("198.18.{i}.1")
    }

    /// Build the topology (no server yet).
    pub fn build(
        nics: u32,
        rate: Option<&str>,
        flow_rate: Option<&str>,
        keep: bool,
    ) -> Result<Lab, String> {
        if !is_root() {
            return Err("braid lab needs root (it creates network namespaces, veth links and tc qdiscs); run it with sudo".into());
        }
        if !(1..=16).contains(&nics) {
            return Err(format!("--nics {nics}: use 1..16"));
        }
        let id = std::process::id() % 100_000;
        let mut lab = Lab {
            server_ns: format!("braidlab-s{id}"),
            client_ns: format!("braidlab-c{id}"),
            nics,
            workdir: std::env::temp_dir().join(format!("braidlab-{id}")),
            server: None,
            ganesha: None,
            keep,
        };
        // Partial set-ups are torn down by Drop on the error path.
        sh(&["ip", "netns", "add", &lab.server_ns])?;
        sh(&["ip", "netns", "add", &lab.client_ns])?;
        for ns in [&lab.server_ns, &lab.client_ns] {
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        if flow_rate.is_some() {
            let range = format!(
                "net.ipv4.ip_local_port_range={FLOW_PORT_BASE} {}",
                FLOW_PORT_BASE + FLOW_PORTS - 1
            );
            sh(&[
                "ip",
                "netns",
                "exec",
                &lab.client_ns,
                "sysctl",
                "-qw",
                &range,
            ])?;
        }
        for i in 0..nics {
            let s = format!("bls{id}n{i}");
            let c = format!("blc{id}n{i}");
            sh(&["ip", "link", "add", &s, "type", "veth", "peer", "name", &c])?;
            sh(&["ip", "link", "set", &s, "netns", &lab.server_ns])?;
            sh(&["ip", "link", "set", &c, "netns", &lab.client_ns])?;
            let sa = format!("{}/24", Self::server_addr(i));
            let ca = format!("198.18.{i}.2/24");
            sh(&["ip", "-n", &lab.server_ns, "addr", "add", &sa, "dev", &s])?;
            sh(&["ip", "-n", &lab.client_ns, "addr", "add", &ca, "dev", &c])?;
            sh(&["ip", "-n", &lab.server_ns, "link", "set", &s, "up"])?;
            sh(&["ip", "-n", &lab.client_ns, "link", "set", &c, "up"])?;
            if let Some(fr) = flow_rate {
                let nic = rate.unwrap_or("10gbit");
                for (ns, dev, dir) in [(&lab.server_ns, &s, "dport"), (&lab.client_ns, &c, "sport")]
                {
                    flow_classes(ns, dev, nic, fr, dir)?;
                }
            } else if let Some(r) = rate {
                for (ns, dev) in [(&lab.server_ns, &s), (&lab.client_ns, &c)] {
                    sh(&[
                        "ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                        "rate", r, "burst", "256kb", "latency", "20ms",
                    ])?;
                }
            }
        }
        let _ = std::fs::remove_dir_all(&lab.workdir);
        std::fs::create_dir_all(lab.workdir.join("share"))
            .map_err(|e| format!("{}: {e}", lab.workdir.display()))?;
        lab.workdir = lab.workdir.clone();
        Ok(lab)
    }

    /// Start Braid in the server namespace, one `[[interface]]` per NIC,
    /// SMB on 445 and NFSv4.1 on 2049.
    pub fn start_braid(&mut self, exe: &Path, speed_mbps: u64) -> Result<(), String> {
        let mut cfg = String::new();
        cfg.push_str("listen = [\"0.0.0.0:445\"]\nnfs_listen = [\"0.0.0.0:2049\"]\nmultichannel = true\nmax_channels = 32\n");
        for i in 0..self.nics {
            cfg.push_str(&format!(
                "[[interface]]\naddress = \"{}\"\nif_index = {}\nspeed_mbps = {speed_mbps}\nrss = true\n",
                Self::server_addr(i),
                i + 1
            ));
        }
        cfg.push_str(&format!(
            "[[share]]\nname = \"share\"\npath = \"{}\"\nroot_squash = false\n",
            self.workdir.join("share").display()
        ));
        let cfg_path = self.workdir.join("braid.toml");
        std::fs::write(&cfg_path, cfg).map_err(|e| e.to_string())?;
        let log =
            std::fs::File::create(self.workdir.join("braid.log")).map_err(|e| e.to_string())?;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.server_ns])
            .arg(exe)
            .arg("serve")
            .arg("--config")
            .arg(&cfg_path)
            .args([
                "--user",
                &format!("{LAB_USER}:{LAB_PASSWORD}"),
                "--log",
                "warn",
            ])
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting braid: {e}"))?;
        let stdout = child.stdout.take();
        self.server = Some(child);
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(out) = stdout {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if line.contains("listening") {
                        let _ = tx.send(());
                    }
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            interrupted()?;
            if rx.recv_timeout(Duration::from_millis(100)).is_ok() {
                return Ok(());
            }
            if let Some(c) = self.server.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    let log =
                        std::fs::read_to_string(self.workdir.join("braid.log")).unwrap_or_default();
                    return Err(format!("braid exited ({st}) in the lab:\n{log}"));
                }
            }
            if Instant::now() > deadline {
                return Err("braid did not start listening within 15 s".into());
            }
        }
    }

    /// Start nfs-ganesha (FSAL VFS, NFSv4.1 only, AUTH_SYS, no root
    /// squash, as Braid's lab share) in the server namespace on
    /// [`GANESHA_PORT`], exporting `share-ganesha` as /share.
    pub fn start_ganesha(&mut self) -> Result<(), String> {
        let binary = ["/usr/bin/ganesha.nfsd", "/usr/sbin/ganesha.nfsd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("ganesha modes need nfs-ganesha: apt-get install nfs-ganesha nfs-ganesha-vfs")?;
        let export = self.workdir.join("share-ganesha");
        let recov = self.workdir.join("ganesha-recov");
        for d in [&export, &recov] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let conf = format!(
            "NFS_CORE_PARAM {{ NFS_Port = {GANESHA_PORT}; Protocols = 4; Enable_NLM = false; \
             Enable_RQUOTA = false; Enable_UDP = false; }}\n\
             NFSv4 {{ Minor_Versions = 1; Graceless = true; RecoveryBackend = fs; \
             RecoveryRoot = {}; Only_Numeric_Owners = true; }}\n\
             EXPORT {{ Export_Id = 1; Path = {}; Pseudo = /share; Protocols = 4; \
             Transports = TCP; Access_Type = RW; Squash = No_Root_Squash; SecType = sys; \
             FSAL {{ Name = VFS; }} }}\n",
            recov.display(),
            export.display()
        );
        let conf_path = self.workdir.join("ganesha.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let log = self.workdir.join("ganesha.log");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.server_ns, binary, "-F", "-f"])
            .arg(&conf_path)
            .arg("-L")
            .arg(&log)
            .arg("-p")
            .arg(self.workdir.join("ganesha.pid"))
            .args(["-N", "NIV_EVENT"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting nfs-ganesha: {e}"))?;
        self.ganesha = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let sport = format!("sport = :{GANESHA_PORT}");
        loop {
            interrupted()?;
            let listening = Command::new("ip")
                .args(["netns", "exec", &self.server_ns, "ss", "-Hltn", &sport])
                .output()
                .map(|o| !o.stdout.is_empty())
                .unwrap_or(false);
            if listening {
                return Ok(());
            }
            if let Some(Ok(Some(st))) = self.ganesha.as_mut().map(|c| c.try_wait()) {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("nfs-ganesha exited ({st}) in the lab:\n{tail}"));
            }
            if Instant::now() > deadline {
                return Err("nfs-ganesha did not listen within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Run one bench from the client namespace (a `braid bench --spec`
    /// child) and parse its JSON report.
    pub fn bench(&self, exe: &Path, spec: &Spec) -> Result<Report, String> {
        let sp = self.workdir.join("spec.json");
        std::fs::write(&sp, serde_json::to_string(spec).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        let out = Command::new("ip")
            .args(["netns", "exec", &self.client_ns])
            .arg(exe)
            .args(["bench", "--json", "--spec"])
            .arg(&sp)
            .env("BRAID_PASSWORD", &spec.password)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("running the bench: {e}"))?;
        interrupted()?;
        if !out.status.success() {
            return Err(format!(
                "bench in the client namespace failed ({})",
                out.status
            ));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("bench JSON: {e}"))
    }
}

/// An htb on `dev`: class 1:1 at the NIC's rate, 1:2 (default) under it
/// for traffic of no capped flow, and 1:(100+k) at the flow rate for the
/// client port FLOW_PORT_BASE+k, matched on `dir` ("sport" on the
/// client's side, "dport" on the server's).
fn flow_classes(ns: &str, dev: &str, nic: &str, flow: &str, dir: &str) -> Result<(), String> {
    let tc = |args: &[&str]| {
        let mut v = vec!["ip", "netns", "exec", ns, "tc"];
        v.extend_from_slice(args);
        sh(&v)
    };
    tc(&[
        "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2", "r2q", "1000",
    ])?;
    tc(&[
        "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", nic, "ceil",
        nic, "burst", "256kb",
    ])?;
    tc(&[
        "class", "add", "dev", dev, "parent", "1:1", "classid", "1:2", "htb", "rate", nic, "ceil",
        nic,
    ])?;
    for k in 0..FLOW_PORTS {
        let id = format!("1:{:x}", 0x100 + k as u32);
        let port = (FLOW_PORT_BASE + k).to_string();
        tc(&[
            "class", "add", "dev", dev, "parent", "1:1", "classid", &id, "htb", "rate", flow,
            "ceil", flow, "burst", "256kb",
        ])?;
        // A short queue per flow: a long one inflates the flow's RTT until
        // TCP's window, not the cap, limits it.
        let leaf = format!("{:x}:", 0x100 + k as u32);
        tc(&[
            "qdisc", "add", "dev", dev, "parent", &id, "handle", &leaf, "bfifo", "limit", "1mb",
        ])?;
        tc(&[
            "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
            "match", "ip", dir, &port, "0xffff", "flowid", &id,
        ])?;
    }
    Ok(())
}

impl Drop for Lab {
    fn drop(&mut self) {
        for mut c in [self.server.take(), self.ganesha.take()]
            .into_iter()
            .flatten()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.keep {
            eprintln!(
                "braid lab: kept namespaces {} and {} (remove with `ip netns del`)",
                self.server_ns, self.client_ns
            );
            return;
        }
        // Deleting a namespace deletes the veth ends inside it.
        for ns in [&self.server_ns, &self.client_ns] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}

/// Build the lab, run every profile in every mode (interleaved), tear down.
pub fn run(exe: &Path, profiles: &[Profile], o: LabOptions) -> Result<CompareResult, String> {
    if !is_root() {
        return Err("braid lab needs root (it creates network namespaces, veth links and tc qdiscs); run it with sudo".into());
    }
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let modes = o
        .modes
        .iter()
        .map(|m| Mode::parse(m))
        .collect::<Result<Vec<_>, _>>()?;
    let mut lab = Lab::build(o.nics, o.rate.as_deref(), o.flow_rate.as_deref(), o.keep)?;
    let speed = o.rate.as_deref().map(rate_mbps).unwrap_or(10_000);
    lab.start_braid(exe, speed)?;
    if modes.iter().any(|m| matches!(m, Mode::GaneshaNfs(_))) {
        lab.start_ganesha()?;
    }
    eprintln!(
        "braid lab: server {} with {} NIC(s) {} (rate {}), client {}",
        lab.server_ns,
        o.nics,
        (0..o.nics)
            .map(Lab::server_addr)
            .collect::<Vec<_>>()
            .join(" "),
        o.rate.as_deref().unwrap_or("unlimited"),
        lab.client_ns
    );
    let target = format!("//{}:445/share", Lab::server_addr(0));
    let nfs_target = format!("nfs://{}:2049/share", Lab::server_addr(0));
    let ganesha_target = format!("nfs://{}:{GANESHA_PORT}/share", Lab::server_addr(0));
    let mut cases = Vec::new();
    for p in profiles {
        let mut row: Vec<Case> = modes
            .iter()
            .map(|m| Case {
                profile: p.name.clone(),
                family: p.family.clone(),
                variant: m.label(o.nics),
                ..Default::default()
            })
            .collect();
        for _ in 0..o.reps.max(1) {
            for (m, case) in modes.iter().zip(row.iter_mut()) {
                interrupted()?;
                let mut s = Spec::default();
                p.apply(&mut s);
                s.target = target.clone();
                s.user = LAB_USER.into();
                s.password = LAB_PASSWORD.into();
                match *m {
                    Mode::BraidNfs(n) => {
                        s.target = nfs_target.clone();
                        s.nconnect = n;
                    }
                    Mode::GaneshaNfs(n) => {
                        s.target = ganesha_target.clone();
                        s.nconnect = n;
                    }
                    Mode::SingleChannel => {
                        s.multichannel = false;
                        s.channels = 1;
                    }
                    Mode::Multichannel => {
                        s.multichannel = true;
                        s.channels = 1;
                    }
                    Mode::Channels(n) => {
                        s.multichannel = true;
                        s.channels = n;
                    }
                }
                (o.load)(&mut s)?;
                case.io_size = s.io_size;
                eprintln!("braid lab: {} with {}", p.name, case.variant);
                match lab.bench(exe, &s) {
                    Ok(r) => {
                        let nics: std::collections::BTreeSet<String> = r
                            .channels
                            .iter()
                            .map(|c| {
                                c.remote
                                    .rsplit_once(':')
                                    .map(|x| x.0)
                                    .unwrap_or("")
                                    .to_string()
                            })
                            .collect();
                        eprintln!(
                            "  {:.0} IOPS {:.1} MiB/s over {} channel(s) on {} NIC(s)",
                            r.total.iops,
                            r.total.mib_s,
                            r.channels.len(),
                            nics.len()
                        );
                        case.runs.push(summarize(&r));
                        case.reports.push(r);
                    }
                    Err(e) => {
                        interrupted()?;
                        eprintln!("  failed: {e}");
                        case.failures.push(e);
                    }
                }
            }
        }
        for mut c in row {
            c.runs.iter().for_each(|_| {});
            let iops: Vec<f64> = c.runs.iter().map(|r| r.iops).collect();
            let mibs: Vec<f64> = c.runs.iter().map(|r| r.mib_s).collect();
            let p50: Vec<f64> = c.runs.iter().map(|r| r.p50_us).collect();
            let p99: Vec<f64> = c.runs.iter().map(|r| r.p99_us).collect();
            c.iops = crate::compare::median_of(iops);
            c.mib_s = crate::compare::median_of(mibs);
            c.p50_us = crate::compare::median_of(p50);
            c.p99_us = crate::compare::median_of(p99);
            cases.push(c);
        }
    }
    let res = CompareResult {
        title: format!(
            "braid lab: {} NIC(s) at {} each{}, {}",
            o.nics,
            o.rate.as_deref().unwrap_or("unlimited"),
            o.flow_rate
                .as_deref()
                .map(|f| format!(", {f} per TCP connection"))
                .unwrap_or_default(),
            modes
                .iter()
                .map(|m| m.label(o.nics))
                .collect::<Vec<_>>()
                .join(" vs ")
        ),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        host: "network namespaces".into(),
        reps: o.reps,
        variants: Vec::new(),
        cases,
        notes: vec![format!(
            "Server namespace {} with NICs {} ({} {} per direction{}); client namespace {}; Braid with one [[interface]] per NIC, SMB on 445, NFSv4.1 on 2049; nfs-ganesha (FSAL VFS, same file system) on 2050 for the ganesha modes.",
            lab.server_ns,
            (0..o.nics).map(Lab::server_addr).collect::<Vec<_>>().join(", "),
            if o.flow_rate.is_some() { "veth, tc htb" } else { "veth, tc tbf" },
            o.rate.as_deref().unwrap_or("unlimited"),
            o.flow_rate
                .as_deref()
                .map(|f| format!(", {f} per TCP connection (htb class per client port)"))
                .unwrap_or_default(),
            lab.client_ns
        )],
    };
    crate::compare::write_named(&res, &o.out, "lab")?;
    drop(lab);
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_label() {
        assert_eq!(Mode::parse("1").unwrap(), Mode::SingleChannel);
        assert_eq!(Mode::parse("multi").unwrap(), Mode::Multichannel);
        assert_eq!(Mode::parse("4").unwrap(), Mode::Channels(4));
        assert_eq!(Mode::parse("nc4").unwrap(), Mode::BraidNfs(4));
        assert_eq!(Mode::parse("gnc16").unwrap(), Mode::GaneshaNfs(16));
        assert_eq!(Mode::GaneshaNfs(4).label(1), "ganesha NFS nconnect 4");
        assert_eq!(Mode::BraidNfs(1).label(1), "NFS nconnect 1");
        for bad in ["nc0", "nc17", "gnc", "ncx", "x"] {
            assert!(Mode::parse(bad).is_err(), "{bad}");
        }
    }
}
