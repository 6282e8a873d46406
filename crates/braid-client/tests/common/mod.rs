//! Test servers: Samba's smbd with a private configuration on free loopback
//! ports (after tests/e2e/servers.py), and Braid's own server.
#![allow(dead_code)]

pub mod ops;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const USER: &str = "braidclient";
pub const SHARE: &str = "data";

pub struct Server {
    pub kind: &'static str,
    pub port: u16,
    pub password: String,
    pub share_dir: PathBuf,
    pub workdir: PathBuf,
    /// Braid's admin API port (0 for Samba).
    pub admin_port: u16,
    child: Child,
}

impl Server {
    pub fn addr(&self) -> SocketAddr {
        format!("127.0.0.1:{}", self.port).parse().unwrap()
    }
    pub fn addr_on(&self, ip: &str) -> SocketAddr {
        format!("{ip}:{}", self.port).parse().unwrap()
    }
    pub fn unc(&self) -> String {
        format!("\\\\127.0.0.1\\{SHARE}")
    }
    pub fn log_tail(&self) -> String {
        let name = if self.kind == "samba" {
            "smbd.log"
        } else {
            "braid.log"
        };
        let s = std::fs::read_to_string(self.workdir.join(name)).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Stop the server and the children it forked (only processes we
        // started: the tree under our child's pid).
        let pids = process_tree(self.child.id());
        for pid in pids.iter().rev() {
            signal(*pid);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("BRAID_TEST_SERVER_LOG").is_some() {
            eprintln!("server files kept in {}", self.workdir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.workdir);
        }
    }
}

/// SIGTERM one process we started (or that our child forked).
fn signal(pid: u32) {
    // SAFETY: kill(2) with a pid from our own child's process tree.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
}

fn process_tree(root: u32) -> Vec<u32> {
    let mut all = vec![root];
    let mut i = 0;
    while i < all.len() {
        let parent = all[i];
        if let Ok(rd) = std::fs::read_dir("/proc") {
            for e in rd.flatten() {
                let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                    continue;
                };
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    continue;
                };
                let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
                    continue;
                };
                let ppid: u32 = rest
                    .split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if ppid == parent && !all.contains(&pid) {
                    all.push(pid);
                }
            }
        }
        i += 1;
    }
    all
}

/// GET a path from Braid's admin API; the response body.
pub fn admin_get(srv: &Server, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.admin_port)).expect("admin API");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "braid-client-{tag}-{}-{:x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// How a server we just started turned out.
enum Startup {
    Accepting,
    Exited(std::process::ExitStatus),
    TimedOut,
}

/// Poll until the server accepts on `addr`, exits, or 20 s pass.
fn wait_startup(addr: SocketAddr, child: &mut Child) -> Startup {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Startup::Accepting;
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Startup::Exited(st);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Startup::TimedOut
}

fn wait_accepting(addr: SocketAddr, child: &mut Child, log: &Path) {
    let log = || std::fs::read_to_string(log).unwrap_or_default();
    match wait_startup(addr, child) {
        Startup::Accepting => {}
        Startup::Exited(st) => panic!("server exited ({st}): {}", log()),
        Startup::TimedOut => panic!("server not accepting on {addr}: {}", log()),
    }
}

/// The SMB and admin ports a Braid started on port 0 printed
/// ("braid: listening on 127.0.0.1:P", "braid: admin API on http://127.0.0.1:Q/").
fn bound_ports(child: &mut Child, log: &Path) -> Result<(u16, u16), String> {
    let port_after = |text: &str, marker: &str| -> Option<u16> {
        let rest = &text[text.find(marker)? + marker.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let smb = port_after(&text, "braid: listening on 127.0.0.1:");
        let admin = port_after(&text, "braid: admin API on http://127.0.0.1:");
        if let (Some(p), Some(a)) = (smb, admin) {
            return Ok((p, a));
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("braid exited ({st}) before printing its ports"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err("braid printed no ports within 20 s".into())
}

/// Wait for the server; on failure stop it (and its children) first.
fn wait_or_kill(addr: SocketAddr, child: &mut Child, log: &Path) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_accepting(addr, child, log)
    }));
    if let Err(e) = r {
        for pid in process_tree(child.id()).iter().rev() {
            signal(*pid);
        }
        let _ = child.kill();
        let _ = child.wait();
        std::panic::resume_unwind(e);
    }
}

pub fn have_smbd() -> bool {
    Command::new("smbd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// The Unix account Samba maps USER to, created once. Tests of one binary
/// run on parallel threads: on a fresh machine two `useradd`s at once
/// race for /etc/passwd's lock, and the loser's share was left owned by
/// root (mkdir ACCESS_DENIED), so creation is serialised and checked.
fn ensure_share_owner() {
    static CREATED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut created = CREATED.lock().unwrap_or_else(|e| e.into_inner());
    if *created {
        return;
    }
    let exists = || {
        Command::new("id")
            .arg(USER)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    for _ in 0..50 {
        if exists() {
            *created = true;
            return;
        }
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status();
        if !exists() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    panic!("could not create the Unix user {USER} for Samba's share");
}

/// What a test does when a server it needs is not on this machine: it
/// fails, saying what is missing, unless BRAID_TEST_SKIP_MISSING=1 asks to
/// skip instead (then `None`, and a SKIP line on stderr). In CI (`CI` set)
/// it fails even when asked: scripts/test.sh builds target/release/braid and
/// installs smbd before the tests, so a missing one there is a broken build,
/// not a reason to pass.
pub fn missing(what: &str, remedy: &str) -> Option<Server> {
    let asked = std::env::var("BRAID_TEST_SKIP_MISSING").is_ok_and(|v| v == "1");
    let ci = std::env::var_os("CI").is_some();
    if asked && !ci {
        eprintln!("SKIP: {what} ({remedy}; skipped as BRAID_TEST_SKIP_MISSING=1 asks)");
        return None;
    }
    if ci {
        panic!("{what} ({remedy}): in CI (CI is set) that is a failure, never a skip");
    }
    panic!("{what} ({remedy}); BRAID_TEST_SKIP_MISSING=1 skips the tests that need it instead");
}

/// Samba with four loopback interfaces for multichannel. Without smbd, see
/// [`missing`]: a failure unless a skip was asked for (`None`).
pub fn start_samba(extra_global: &str) -> Option<Server> {
    if !have_smbd() {
        return missing("smbd is not installed", "apt-get install samba");
    }
    let w = tempdir("samba");
    let share = w.join("share");
    std::fs::create_dir_all(&share).unwrap();
    for sub in [
        "run",
        "lock",
        "state",
        "cache",
        "private",
        "ncalrpc",
        "usershares",
    ] {
        std::fs::create_dir_all(w.join(sub)).unwrap();
    }
    // As root (CI), smbd serves the share as USER's Unix account.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        ensure_share_owner();
        let owned = Command::new("chown")
            .arg(format!("{USER}:"))
            .arg(&share)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(owned, "chown {USER}: {} failed", share.display());
    }
    // Let the share owner traverse down to the share (tempdirs may be 0700).
    let mut p = share.clone();
    while let Some(parent) = p.parent().map(Path::to_path_buf) {
        let _ = Command::new("chmod").arg("o+x").arg(&p).status();
        if parent == Path::new("/") {
            break;
        }
        p = parent;
    }
    let port = free_port();
    let ifs: Vec<String> = (1..=4)
        .map(|i| format!("\"127.0.0.{i};if_index={i},speed=10000000000,capability=RSS\""))
        .collect();
    let conf = format!(
        "[global]\n  server role = standalone server\n  smb ports = {port}\n  interfaces = {ifs}\n  bind interfaces only = {bind_only}\n  server multi channel support = yes\n  server min protocol = SMB2_02\n  pid directory = {w}/run\n  lock directory = {w}/lock\n  state directory = {w}/state\n  cache directory = {w}/cache\n  private dir = {w}/private\n  ncalrpc dir = {w}/ncalrpc\n  usershare path = {w}/usershares\n  max log size = 0\n  log level = 1\n  disable netbios = yes\n  load printers = no\n  printing = bsd\n  printcap name = /dev/null\n  disable spoolss = yes\n  map to guest = never\n  passdb backend = tdbsam\n{extra_global}\n[{SHARE}]\n  path = {share}\n  read only = no\n  guest ok = no\n",
        ifs = ifs.join(" "),
        bind_only = if std::env::var_os("BRAID_SAMBA_BIND_ALL").is_some() { "no" } else { "yes" },
        w = w.display(),
        share = share.display(),
    );
    let conf_path = w.join("smb.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let password = format!("Pw-{:x}", rand::random::<u64>());
    let mut sp = Command::new("smbpasswd")
        .arg("-c")
        .arg(&conf_path)
        .args(["-a", "-s", USER])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("smbpasswd");
    sp.stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n{password}\n").as_bytes())
        .unwrap();
    let out = sp.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "smbpasswd: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = w.join("smbd.log");
    // Its own process group: smbd signals its whole process group when it
    // shuts down, which would otherwise include cargo and its callers.
    let mut child = Command::new("smbd")
        .args(["--foreground", "--no-process-group", "--debug-stdout", "-s"])
        .process_group(0)
        .arg(&conf_path)
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(
            std::fs::File::options().append(true).open(&log).unwrap(),
        ))
        .current_dir(&w)
        .spawn()
        .expect("smbd");
    wait_or_kill(
        format!("127.0.0.1:{port}").parse().unwrap(),
        &mut child,
        &log,
    );
    Some(Server {
        kind: "samba",
        port,
        password,
        share_dir: share,
        workdir: w,
        admin_port: 0,
        child,
    })
}

/// Braid's server from target/release/braid (or `BRAID_BIN`, as for
/// tests/e2e). Not built: see [`missing`], a failure unless a skip was asked
/// for (`None`).
pub fn start_braid() -> Option<Server> {
    let bin = std::env::var_os("BRAID_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/braid")
        });
    if !bin.exists() {
        return missing(
            &format!("{} is not built", bin.display()),
            "cargo build --release -p braid",
        );
    }
    let w = tempdir("braid");
    let share = w.join("share");
    std::fs::create_dir_all(&share).unwrap();
    let password = format!("Pw-{:x}", rand::random::<u64>());
    let log = w.join("braid.log");
    // Port 0: the kernel picks free ports as the server binds them, and the
    // server prints them; nothing can take them in between (ports picked
    // beforehand could be taken by a test starting in parallel).
    let mut child = Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--admin-listen", "127.0.0.1:0"])
        .arg("--share")
        .arg(format!("{SHARE}={}", share.display()))
        .arg("--user")
        .arg(format!("{USER}:{password}"))
        // BRAID_TEST_SERVER_LOG=braid_server=trace: what the server logs
        // into braid.log (where a failing test says it is).
        .args(
            std::env::var("BRAID_TEST_SERVER_LOG")
                .map(|filter| vec!["--log".to_string(), filter])
                .unwrap_or_default(),
        )
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(
            std::fs::File::options().append(true).open(&log).unwrap(),
        ))
        .current_dir(&w)
        .spawn()
        .expect("braid");
    let (port, admin_port) = match bound_ports(&mut child, &log) {
        Ok(ports) => ports,
        Err(why) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{why}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
    };
    wait_or_kill(
        format!("127.0.0.1:{port}").parse().unwrap(),
        &mut child,
        &log,
    );
    Some(Server {
        kind: "braid",
        port,
        password,
        share_dir: share,
        workdir: w,
        admin_port,
        child,
    })
}
