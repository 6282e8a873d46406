//! The load engine: connect (SMB with multichannel, or NFSv4.1 with
//! nconnect), prepare files, run `threads x queue_depth` closed-loop tasks
//! for warm-up + duration, and collect per-operation histograms and
//! per-connection traffic. The loops are written once against
//! [`BenchFs`](crate::fs::BenchFs).

use crate::fs::{mkdir_p, BenchFile, BenchFs, ConnSnapshot, FsError, FsResult, SmbFs};
use crate::report::{ChannelStats, Latency, OpStats, Report, ServerInfo};
use crate::server_cpu::{tree_cpu_seconds, ServerCpu};
use crate::spec::{parse_target, Mode, Protocol, Security, Spec};
use braid_client::{dialect, ClientConfig, Connection, Policy, Session, Tree};
use bytes::Bytes;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Operation types measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Create,
    Open,
    Close,
    QueryInfo,
    Delete,
    Mkdir,
    Rmdir,
}

const OPS: [Op; 9] = [
    Op::Read,
    Op::Write,
    Op::Create,
    Op::Open,
    Op::Close,
    Op::QueryInfo,
    Op::Delete,
    Op::Mkdir,
    Op::Rmdir,
];

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Create => "create",
            Op::Open => "open",
            Op::Close => "close",
            Op::QueryInfo => "query_info",
            Op::Delete => "delete",
            Op::Mkdir => "mkdir",
            Op::Rmdir => "rmdir",
        }
    }
}

fn new_hist() -> Histogram<u64> {
    // 100 ns .. 100 s, 3 significant digits.
    Histogram::new_with_bounds(100, 100_000_000_000, 3).expect("histogram bounds")
}

/// Per-task counters, merged at the end.
struct Local {
    hist: Vec<Option<Histogram<u64>>>,
    count: [u64; 9],
    bytes: [u64; 9],
    errors: [u64; 9],
    verify_errors: u64,
    first_error: Option<String>,
    measure_start: Instant,
    /// (operations, bytes, errors) completed in each second of the run.
    per_second: Vec<(u64, u64, u64)>,
}

impl Local {
    fn new(measure_start: Instant) -> Self {
        Local {
            hist: (0..OPS.len()).map(|_| None).collect(),
            count: [0; 9],
            bytes: [0; 9],
            errors: [0; 9],
            verify_errors: 0,
            first_error: None,
            measure_start,
            per_second: Vec::new(),
        }
    }
    fn second(&mut self, done: Instant) -> &mut (u64, u64, u64) {
        let s = done.saturating_duration_since(self.measure_start).as_secs() as usize;
        if self.per_second.len() <= s {
            self.per_second.resize(s + 1, (0, 0, 0));
        }
        &mut self.per_second[s]
    }
    fn record(&mut self, op: Op, t0: Instant, dt: Duration, bytes: u64) {
        if t0 < self.measure_start {
            return;
        }
        let i = op as usize;
        self.count[i] += 1;
        self.bytes[i] += bytes;
        let h = self.hist[i].get_or_insert_with(new_hist);
        let _ = h.record((dt.as_nanos() as u64).clamp(100, 100_000_000_000));
        let s = self.second(t0 + dt);
        s.0 += 1;
        s.1 += bytes;
    }
    fn error(&mut self, op: Op, t0: Instant, e: String) {
        if t0 >= self.measure_start {
            self.errors[op as usize] += 1;
            self.second(t0).2 += 1;
        }
        if self.first_error.is_none() {
            self.first_error = Some(format!("{}: {e}", op.name()));
        }
    }
    fn merge(&mut self, o: Local) {
        for i in 0..OPS.len() {
            self.count[i] += o.count[i];
            self.bytes[i] += o.bytes[i];
            self.errors[i] += o.errors[i];
            if let Some(h) = &o.hist[i] {
                let _ = self.hist[i].get_or_insert_with(new_hist).add(h);
            }
        }
        self.verify_errors += o.verify_errors;
        if self.per_second.len() < o.per_second.len() {
            self.per_second.resize(o.per_second.len(), (0, 0, 0));
        }
        for (a, b) in self.per_second.iter_mut().zip(&o.per_second) {
            a.0 += b.0;
            a.1 += b.1;
            a.2 += b.2;
        }
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
    }
}

/// A connected session and tree, with its channels bound.
pub struct Client {
    pub session: Arc<Session>,
    pub tree: Arc<Tree>,
    pub server: ServerInfo,
    pub warnings: Vec<String>,
}

fn dialect_name(d: u16) -> String {
    match d {
        dialect::SMB311 => "3.1.1".into(),
        dialect::SMB302 => "3.0.2".into(),
        dialect::SMB300 => "3.0".into(),
        dialect::SMB210 => "2.1".into(),
        dialect::SMB202 => "2.0.2".into(),
        o => format!("{o:#06x}"),
    }
}

/// Connect, authenticate, tree connect, and bind channels.
pub async fn connect(spec: &Spec) -> Result<Client, String> {
    let (host, port, share) = parse_target(&spec.target)?;
    let addr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("resolving {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    let mut cfg = ClientConfig::default();
    match spec.security {
        Security::Plain => {
            cfg.dialects = vec![dialect::SMB302];
            cfg.signing = false;
        }
        Security::Sign => {}
        Security::Encrypt => cfg.encrypt = true,
    }
    // Enough credits for every request in flight (1 MiB = 16 credits).
    let charge = (spec.io_size as usize).div_ceil(65536).max(1);
    let want = spec.threads as usize * spec.queue_depth as usize * charge + 64;
    let per_conn = if spec.multichannel {
        want.div_ceil(spec.channels as usize)
    } else {
        want
    };
    cfg.credit_target = per_conn.clamp(512, 8192) as u16;
    cfg.max_io = cfg.max_io.max(spec.io_size);
    let cfg = Arc::new(cfg);
    let conn = tokio::time::timeout(
        Duration::from_secs(10),
        Connection::connect_with(addr, cfg.clone()),
    )
    .await
    .map_err(|_| format!("connecting to {addr}: timed out"))?
    .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let mc_offered = conn.negotiated().multichannel();
    let session = Session::setup(conn, &spec.user, &spec.domain, &spec.password)
        .await
        .map_err(|e| format!("session setup as {}: {e}", spec.user))?;
    session.set_policy(Policy::LeastOutstanding);
    let unc = format!("\\\\{host}\\{share}");
    let tree = session
        .tree_connect(&unc)
        .await
        .map_err(|e| format!("tree connect {unc}: {e}"))?;
    let mut warnings = Vec::new();
    let mut interfaces = Vec::new();
    let ifaces = tree.query_network_interfaces().await.unwrap_or_default();
    for i in &ifaces {
        interfaces.push(format!(
            "{} if_index={} speed={}Mb/s{}",
            i.address,
            i.if_index,
            i.link_speed / 1_000_000,
            if i.capability & 1 != 0 { " rss" } else { "" }
        ));
    }
    if spec.multichannel {
        if !mc_offered {
            warnings.push("server does not offer multichannel: one channel only".into());
        } else {
            let mut addrs: Vec<SocketAddr> = Vec::new();
            if !spec.connect_to.is_empty() {
                for a in &spec.connect_to {
                    let sa = a
                        .parse::<SocketAddr>()
                        .or_else(|_| a.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, port)))
                        .map_err(|_| format!("--connect-to '{a}': not an address"))?;
                    addrs.push(sa);
                }
            } else {
                let mut sorted = ifaces.clone();
                sorted.sort_by_key(|i| std::cmp::Reverse(i.link_speed));
                for i in sorted {
                    if i.address.is_ipv4() != addr.is_ipv4() || i.address.is_unspecified() {
                        continue;
                    }
                    let sa = SocketAddr::new(i.address, port);
                    if !addrs.contains(&sa) {
                        addrs.push(sa);
                    }
                }
                if addrs.is_empty() {
                    addrs.push(addr);
                }
            }
            for a in addrs {
                let have = usize::from(a == addr);
                for _ in have..spec.channels as usize {
                    match tokio::time::timeout(Duration::from_secs(5), session.bind_channel(a))
                        .await
                    {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => {
                            warnings.push(format!("binding a channel to {a}: {e}"));
                            break;
                        }
                        Err(_) => {
                            warnings.push(format!("binding a channel to {a}: timed out"));
                            break;
                        }
                    }
                }
            }
        }
    } else if spec.channels > 1 {
        warnings.push("channels > 1 needs --multichannel: one channel only".into());
    }
    let server = ServerInfo {
        dialect: dialect_name(session.dialect()),
        signing: session.is_signing() && !session.is_encrypting(),
        signing_algorithm: format!("{:?}", session.signing_algorithm()),
        encryption: session.is_encrypting()
            || tree.share_flags() & braid_client::SHARE_FLAG_ENCRYPT_DATA != 0,
        cipher: session.cipher().map(|c| format!("{c:?}")),
        multichannel_offered: mc_offered,
        interfaces,
    };
    Ok(Client {
        session,
        tree,
        server,
        warnings,
    })
}

/// 64-bit mix (splitmix64) of one 8-byte word of the data pattern.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The verification pattern: word k of file f is mix(k ^ f << 40).
pub fn fill_pattern(file: u32, offset: u64, buf: &mut [u8]) {
    let base = offset / 8;
    let salt = (file as u64) << 40;
    for (k, w) in buf.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&mix((base + k as u64) ^ salt).to_le_bytes());
    }
}

fn pattern(file: u32, offset: u64, len: usize) -> Bytes {
    let mut v = vec![0u8; len];
    fill_pattern(file, offset, &mut v);
    Bytes::from(v)
}

fn check_pattern(file: u32, offset: u64, data: &[u8]) -> bool {
    let base = offset / 8;
    let salt = (file as u64) << 40;
    data.chunks_exact(8)
        .enumerate()
        .all(|(k, w)| w == mix((base + k as u64) ^ salt).to_le_bytes())
}

/// Tiny xorshift generator per task.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Create or reuse the data files; (re)write them when their size differs
/// or when verifying.
async fn prepare_files<B: BenchFs>(
    spec: &Spec,
    fs: &B,
    progress: bool,
) -> Result<Vec<B::File>, String> {
    mkdir_p(fs, &spec.dir).await.map_err(|e| e.msg)?;
    let mut files = Vec::new();
    for i in 0..spec.files {
        let path = format!("{}/f{i}.dat", spec.dir);
        let f = fs
            .open_rw(&path)
            .await
            .map_err(|e| format!("create {path}: {e}"))?;
        if f.size_at_open() != spec.file_size || spec.verify {
            if progress {
                eprint!("\rpreparing {path} ({} MiB)        ", spec.file_size >> 20);
            }
            if f.size_at_open() > spec.file_size {
                f.set_size(spec.file_size)
                    .await
                    .map_err(|e| format!("truncate {path}: {e}"))?;
            }
            let chunk = fs.max_write().min(1 << 20) as u64;
            let mut set = tokio::task::JoinSet::new();
            let mut off = 0u64;
            while off < spec.file_size || !set.is_empty() {
                while off < spec.file_size && set.len() < 8 {
                    let len = chunk.min(spec.file_size - off) as usize;
                    let f = f.clone();
                    let o = off;
                    set.spawn(async move { f.write(o, pattern(i, o, len)).await });
                    off += len as u64;
                }
                if let Some(r) = set.join_next().await {
                    r.map_err(|e| e.to_string())?
                        .map_err(|e| format!("write {path}: {e}"))?;
                }
            }
        }
        files.push(f);
    }
    if progress {
        eprint!("\r{:60}\r", "");
    }
    Ok(files)
}

struct Shared<B: BenchFs> {
    spec: Spec,
    fs: Arc<B>,
    files: Vec<B::File>,
    measure_start: Instant,
    end: Instant,
    stop: AtomicBool,
    ops: AtomicU64,
    bytes: AtomicU64,
    write_buf: Bytes,
    cursors: Vec<AtomicU64>,
}

async fn io_task<B: BenchFs>(sh: Arc<Shared<B>>, thread: u32, seed: u64) -> Local {
    let s = &sh.spec;
    let mut l = Local::new(sh.measure_start);
    let mut rng = Rng(seed | 1);
    let io = s.io_size as u64;
    let blocks = (s.file_size / io).max(1);
    let nfiles = sh.files.len() as u64;
    // Sequential: thread t streams through file t % files, threads sharing
    // a file start at staggered offsets.
    let seq_file = thread as u64 % nfiles;
    let sharing = (s.threads as u64).div_ceil(nfiles).max(1);
    let seq_start = (thread as u64 / nfiles) * blocks / sharing;
    loop {
        let t0 = Instant::now();
        if t0 >= sh.end || sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let read = s.read_pct == 100 || (s.read_pct > 0 && rng.below(100) < s.read_pct as u64);
        let (fi, block) = if s.random {
            (rng.below(nfiles), rng.below(blocks))
        } else {
            let c = sh.cursors[thread as usize].fetch_add(1, Ordering::Relaxed);
            (seq_file, (seq_start + c) % blocks)
        };
        let off = block * io;
        let len = io.min(s.file_size - off);
        let f = &sh.files[fi as usize];
        let r = if read {
            match f.read(off, len as u32).await {
                Ok(b) => {
                    if s.verify && (b.len() as u64 != len || !check_pattern(fi as u32, off, &b)) {
                        l.verify_errors += 1;
                        if l.first_error.is_none() {
                            l.first_error = Some(format!(
                                "verify: file {fi} offset {off}: {} bytes differ from the pattern",
                                b.len()
                            ));
                        }
                    }
                    Ok(b.len() as u64)
                }
                Err(e) => Err(e),
            }
        } else {
            let data = if s.verify {
                pattern(fi as u32, off, len as usize)
            } else {
                sh.write_buf.slice(..len as usize)
            };
            f.write(off, data).await.map(u64::from)
        };
        let dt = t0.elapsed();
        let op = if read { Op::Read } else { Op::Write };
        match r {
            Ok(n) => {
                l.record(op, t0, dt, n);
                sh.ops.fetch_add(1, Ordering::Relaxed);
                sh.bytes.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                let fatal = e.fatal;
                l.error(op, t0, e.msg);
                if fatal {
                    sh.stop.store(true, Ordering::Relaxed);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    l
}

async fn md_step<B: BenchFs, T>(
    l: &mut Local,
    sh: &Shared<B>,
    op: Op,
    fut: impl std::future::Future<Output = FsResult<T>>,
) -> Option<T> {
    let t0 = Instant::now();
    match fut.await {
        Ok(v) => {
            l.record(op, t0, t0.elapsed(), 0);
            sh.ops.fetch_add(1, Ordering::Relaxed);
            Some(v)
        }
        Err(e) => {
            if e.fatal {
                sh.stop.store(true, Ordering::Relaxed);
            }
            l.error(op, t0, e.msg);
            None
        }
    }
}

async fn md_task<B: BenchFs>(sh: Arc<Shared<B>>, task: u32) -> Local {
    let mut l = Local::new(sh.measure_start);
    let base = format!("{}/md{task}", sh.spec.dir);
    let tree = sh.fs.clone();
    let mut i: u64 = 0;
    loop {
        if Instant::now() >= sh.end || sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let name = format!("{base}/f{}", i % sh.spec.md_files.max(1) as u64);
        if let Some(f) = md_step(&mut l, &sh, Op::Create, tree.create(&name)).await {
            md_step(&mut l, &sh, Op::Close, f.close()).await;
        }
        if let Some(f) = md_step(&mut l, &sh, Op::Open, tree.open(&name)).await {
            md_step(&mut l, &sh, Op::QueryInfo, f.stat()).await;
            md_step(&mut l, &sh, Op::Close, f.close()).await;
        }
        md_step(&mut l, &sh, Op::Delete, tree.unlink(&name)).await;
        if i.is_multiple_of(8) {
            let d = format!("{base}/d{}", i % 64);
            if md_step(&mut l, &sh, Op::Mkdir, tree.mkdir(&d))
                .await
                .is_some()
            {
                md_step(&mut l, &sh, Op::Rmdir, tree.rmdir(&d)).await;
            }
        }
        i += 1;
    }
    l
}

/// Run one bench. `progress` prints a live line on stderr.
pub async fn run(spec: &Spec, progress: bool) -> Result<Report, String> {
    spec.validate()?;
    match spec.protocol() {
        Protocol::Smb => {
            let client = connect(spec).await?;
            let fs = Arc::new(SmbFs {
                session: client.session.clone(),
                tree: client.tree.clone(),
            });
            let r = run_on(fs, spec, progress, &client.server, &client.warnings).await;
            let _ = client.tree.disconnect().await;
            let _ = client.session.logoff().await;
            r
        }
        Protocol::Nfs => {
            let (fs, server, warnings) = crate::nfs::connect(spec).await?;
            let client = fs.client.clone();
            let r = run_on(Arc::new(fs), spec, progress, &server, &warnings).await;
            client.shutdown().await;
            r
        }
    }
}

/// Run one bench over a connected share or export.
pub async fn run_on<B: BenchFs>(
    fs: Arc<B>,
    spec: &Spec,
    progress: bool,
    server: &ServerInfo,
    warnings: &[String],
) -> Result<Report, String> {
    let err = |e: FsError| e.msg;
    let files = match spec.mode {
        Mode::Io => prepare_files(spec, &*fs, progress).await?,
        Mode::Metadata => {
            mkdir_p(&*fs, &spec.dir).await.map_err(err)?;
            for t in 0..spec.threads * spec.queue_depth {
                mkdir_p(&*fs, &format!("{}/md{t}", spec.dir))
                    .await
                    .map_err(err)?;
            }
            Vec::new()
        }
    };
    let mut wb = vec![0u8; spec.io_size as usize];
    fill_pattern(0xFFFF, 0, &mut wb);
    let now = Instant::now();
    let measure_start = now + Duration::from_secs_f64(spec.warmup);
    let end = measure_start + Duration::from_secs_f64(spec.duration);
    let sh = Arc::new(Shared {
        spec: spec.clone(),
        fs: fs.clone(),
        files,
        measure_start,
        end,
        stop: AtomicBool::new(false),
        ops: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        write_buf: Bytes::from(wb),
        cursors: (0..spec.threads).map(|_| AtomicU64::new(0)).collect(),
    });
    // Progress line and the traffic snapshot at the start of measurement.
    let mon = {
        let sh = sh.clone();
        tokio::spawn(async move {
            let mut at_start = None;
            let (mut last_ops, mut last_bytes, mut last_t) = (0u64, 0u64, Instant::now());
            loop {
                let next = (last_t + Duration::from_secs(1)).min(if at_start.is_none() {
                    sh.measure_start
                } else {
                    sh.end
                });
                tokio::time::sleep_until(next.max(Instant::now()).into()).await;
                let t = Instant::now();
                if at_start.is_none() && t >= sh.measure_start {
                    at_start = Some(sh.fs.connections());
                }
                if progress && t.duration_since(last_t) >= Duration::from_millis(900) {
                    let ops = sh.ops.load(Ordering::Relaxed);
                    let bytes = sh.bytes.load(Ordering::Relaxed);
                    let dt = t.duration_since(last_t).as_secs_f64();
                    let phase = if t < sh.measure_start {
                        format!("warm-up {:>4.0}s", (sh.measure_start - t).as_secs_f64())
                    } else {
                        format!(
                            "run {:>5.0}s left",
                            sh.end.saturating_duration_since(t).as_secs_f64()
                        )
                    };
                    let conns = sh.fs.connections();
                    let live = conns.iter().filter(|c| c.alive).count();
                    eprint!(
                        "\r{phase}  {:>9.0} IOPS  {:>9.1} MiB/s  channels {live}/{}   ",
                        (ops - last_ops) as f64 / dt,
                        (bytes - last_bytes) as f64 / dt / 1048576.0,
                        conns.len()
                    );
                    (last_ops, last_bytes, last_t) = (ops, bytes, t);
                }
                if t >= sh.end || sh.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            at_start.unwrap_or_else(|| sh.fs.connections())
        })
    };
    // The server's CPU at the start of measuring, sampled by a thread of
    // its own: a load that never waits (a share in this process) could keep
    // every runtime worker busy past that moment.
    let cpu_start_sampler = spec.server_pid.map(|pid| {
        std::thread::spawn(move || {
            std::thread::sleep(measure_start.saturating_duration_since(Instant::now()));
            tree_cpu_seconds(pid)
        })
    });
    let mut tasks = tokio::task::JoinSet::new();
    let mut seed = 0x1234_5678_9ABC_DEF1u64 ^ (std::process::id() as u64) << 32;
    for t in 0..spec.threads {
        for q in 0..spec.queue_depth {
            seed = mix(seed);
            let sh = sh.clone();
            match spec.mode {
                Mode::Io => tasks.spawn(io_task(sh, t, seed)),
                Mode::Metadata => tasks.spawn(md_task(sh, t * spec.queue_depth + q)),
            };
        }
    }
    let mut total = Local::new(measure_start);
    while let Some(r) = tasks.join_next().await {
        total.merge(r.map_err(|e| format!("bench task: {e}"))?);
    }
    let finished = Instant::now();
    let cpu_at_end = spec.server_pid.and_then(tree_cpu_seconds);
    sh.stop.store(true, Ordering::Relaxed);
    let start_snap = mon.await.map_err(|e| e.to_string())?;
    let cpu_at_start = cpu_start_sampler.and_then(|t| t.join().ok().flatten());
    let end_snap = sh.fs.connections();
    if progress {
        eprint!("\r{:80}\r", "");
    }
    let elapsed = finished
        .saturating_duration_since(measure_start)
        .as_secs_f64()
        .max(1e-3);
    let mut warnings = warnings.to_vec();
    let mut ops = BTreeMap::new();
    let mut all = new_hist();
    let mut tot = OpStats::default();
    for op in OPS {
        let i = op as usize;
        if total.count[i] == 0 && total.errors[i] == 0 {
            continue;
        }
        let h = total.hist[i].take().unwrap_or_else(new_hist);
        let _ = all.add(&h);
        let st = OpStats {
            count: total.count[i],
            errors: total.errors[i],
            bytes: total.bytes[i],
            iops: total.count[i] as f64 / elapsed,
            mib_s: total.bytes[i] as f64 / elapsed / 1048576.0,
            latency_us: Latency::from_hist(&h),
        };
        tot.count += st.count;
        tot.errors += st.errors;
        tot.bytes += st.bytes;
        ops.insert(op.name().to_string(), st);
    }
    tot.iops = tot.count as f64 / elapsed;
    tot.mib_s = tot.bytes as f64 / elapsed / 1048576.0;
    tot.latency_us = Latency::from_hist(&all);
    let server_cpu = match (spec.server_pid, cpu_at_start, cpu_at_end) {
        (Some(pid), Some(a), Some(b)) => {
            Some(ServerCpu::new(pid, (b - a).max(0.0), tot.bytes, tot.count))
        }
        _ => None,
    };
    if spec.server_pid.is_some() && server_cpu.is_none() {
        warnings.push(format!(
            "server CPU not measured: process {} could not be read in /proc",
            spec.server_pid.unwrap_or(0)
        ));
    }
    let channels = end_snap
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let zero = ConnSnapshot::default();
            let a = start_snap.get(i).unwrap_or(&zero);
            let sent = b.bytes_sent.saturating_sub(a.bytes_sent);
            let recv = b.bytes_received.saturating_sub(a.bytes_received);
            ChannelStats {
                local: b.local.clone(),
                remote: b.remote.clone(),
                alive: b.alive,
                requests: b.requests.saturating_sub(a.requests),
                bytes_sent: sent,
                bytes_received: recv,
                mib_s: (sent + recv) as f64 / elapsed / 1048576.0,
            }
        })
        .collect();
    for f in &sh.files {
        let _ = f.close().await;
    }
    if spec.mode == Mode::Metadata {
        for t in 0..spec.threads * spec.queue_depth {
            let base = format!("{}/md{t}", spec.dir);
            for k in 0..spec.md_files {
                let _ = fs.unlink(&format!("{base}/f{k}")).await;
            }
            let _ = fs.rmdir(&base).await;
        }
    }
    if let Some(e) = total.first_error {
        warnings.push(format!("first error: {e}"));
    }
    let mut report = Report {
        tool: format!("braid-bench {}", env!("CARGO_PKG_VERSION")),
        protocol: spec.protocol().name().into(),
        spec: spec.clone(),
        server: server.clone(),
        elapsed_s: elapsed,
        total: tot,
        ops,
        channels,
        verify_errors: total.verify_errors,
        warnings,
        // Whole seconds only: the last, partial one would read low.
        server_cpu,
        per_second: total
            .per_second
            .iter()
            .take(elapsed.floor() as usize)
            .enumerate()
            .map(|(t, &(ops, bytes, errors))| crate::report::SecondStats {
                t: t as u64,
                ops,
                iops: ops as f64,
                mib_s: bytes as f64 / 1048576.0,
                errors,
            })
            .collect(),
        advice: Vec::new(),
    };
    report.advice = braid_advisor::advise(&report.workload());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fs::{BenchFile, BenchFs, ConnSnapshot, FsError, FsResult};
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// An in-memory share; `corrupt` flips one byte of every read.
    #[derive(Default)]
    struct MemFs {
        files: Mutex<HashMap<String, Arc<Mutex<Vec<u8>>>>>,
        dirs: Mutex<Vec<String>>,
        corrupt: bool,
    }

    #[derive(Clone)]
    struct MemFile {
        data: Arc<Mutex<Vec<u8>>>,
        size: u64,
        corrupt: bool,
    }

    impl BenchFile for MemFile {
        fn size_at_open(&self) -> u64 {
            self.size
        }
        async fn read(&self, offset: u64, len: u32) -> FsResult<Bytes> {
            let d = self.data.lock().unwrap();
            let end = (offset as usize + len as usize).min(d.len());
            let mut v = d[(offset as usize).min(end)..end].to_vec();
            if self.corrupt && !v.is_empty() {
                v[0] ^= 1;
            }
            Ok(Bytes::from(v))
        }
        async fn write(&self, offset: u64, data: Bytes) -> FsResult<u32> {
            let mut d = self.data.lock().unwrap();
            let end = offset as usize + data.len();
            if d.len() < end {
                d.resize(end, 0);
            }
            d[offset as usize..end].copy_from_slice(&data);
            Ok(data.len() as u32)
        }
        async fn set_size(&self, size: u64) -> FsResult<()> {
            self.data.lock().unwrap().resize(size as usize, 0);
            Ok(())
        }
        async fn stat(&self) -> FsResult<u64> {
            Ok(self.data.lock().unwrap().len() as u64)
        }
        async fn close(&self) -> FsResult<()> {
            Ok(())
        }
    }

    impl MemFs {
        fn file(&self, path: &str, create: bool) -> FsResult<MemFile> {
            let mut m = self.files.lock().unwrap();
            let data = match m.get(path) {
                Some(d) => d.clone(),
                None if create => m.entry(path.into()).or_default().clone(),
                None => return Err(FsError::new(format!("{path}: no such file"))),
            };
            let size = data.lock().unwrap().len() as u64;
            Ok(MemFile {
                data,
                size,
                corrupt: self.corrupt,
            })
        }
    }

    impl BenchFs for MemFs {
        type File = MemFile;
        async fn mkdir(&self, path: &str) -> FsResult<()> {
            let mut d = self.dirs.lock().unwrap();
            if d.iter().any(|x| x == path) {
                return Err(FsError {
                    exists: true,
                    ..FsError::new("exists")
                });
            }
            d.push(path.into());
            Ok(())
        }
        async fn rmdir(&self, path: &str) -> FsResult<()> {
            self.dirs.lock().unwrap().retain(|x| x != path);
            Ok(())
        }
        async fn unlink(&self, path: &str) -> FsResult<()> {
            self.files.lock().unwrap().remove(path);
            Ok(())
        }
        async fn open_rw(&self, path: &str) -> FsResult<MemFile> {
            self.file(path, true)
        }
        async fn create(&self, path: &str) -> FsResult<MemFile> {
            self.file(path, true)
        }
        async fn open(&self, path: &str) -> FsResult<MemFile> {
            self.file(path, false)
        }
        fn max_write(&self) -> u32 {
            1 << 20
        }
        fn connections(&self) -> Vec<ConnSnapshot> {
            vec![ConnSnapshot {
                alive: true,
                ..Default::default()
            }]
        }
    }

    fn small_spec() -> Spec {
        let mut s = Spec::default();
        crate::profiles::find("smoke").unwrap().apply(&mut s);
        s.target = "nfs://mem/export".into();
        s.file_size = 1 << 20;
        s.io_size = 4096;
        s.duration = 0.3;
        s.warmup = 0.0;
        s
    }

    #[tokio::test]
    async fn verify_passes_on_good_data_and_catches_a_corrupted_read() {
        let s = small_spec();
        let info = ServerInfo::default();
        let good = run_on(Arc::new(MemFs::default()), &s, false, &info, &[])
            .await
            .unwrap();
        assert!(good.ops["read"].count > 0 && good.ops["write"].count > 0);
        assert_eq!(good.verify_errors, 0);
        assert_eq!(good.protocol, "nfs");

        let bad_fs = MemFs {
            corrupt: true,
            ..Default::default()
        };
        let bad = run_on(Arc::new(bad_fs), &s, false, &info, &[])
            .await
            .unwrap();
        assert!(bad.verify_errors > 0, "a corrupted read went unnoticed");
        assert!(bad.warnings.iter().any(|w| w.contains("verify")));
    }

    /// A run of `s` against an in-memory file system.
    async fn run_in_memory(s: &Spec) -> Report {
        run_on(
            Arc::new(MemFs::default()),
            s,
            false,
            &ServerInfo::default(),
            &[],
        )
        .await
        .unwrap()
    }

    /// The in-memory share runs in this process, so this process is the
    /// "server": its CPU over the measured window is what the report shows.
    // Two workers: the in-memory share never makes a task wait, so on one
    // thread the monitor that samples the CPU at the start of measuring
    // would not run until the load stops.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_server_cpu_of_the_measured_window_is_reported() {
        let mut s = small_spec();
        s.warmup = 0.2;
        s.duration = 0.5;
        s.server_pid = Some(std::process::id());
        let r = run_in_memory(&s).await;
        let cpu = r.server_cpu.clone().expect("server CPU measured");
        assert_eq!(cpu.pid, std::process::id());
        assert!(cpu.seconds > 0.0, "{cpu:?}");
        let per_op = cpu.seconds * 1e6 / r.total.count as f64;
        assert!((cpu.us_per_op - per_op).abs() < 1e-6, "{cpu:?}");
        assert!(r.to_text().contains("CPU-s/GiB"));

        s.server_pid = Some(u32::MAX - 1);
        let r = run_in_memory(&s).await;
        assert!(r.server_cpu.is_none());
        assert!(r
            .warnings
            .iter()
            .any(|w| w.contains("server CPU not measured")));
    }

    #[tokio::test]
    async fn each_whole_second_has_its_counts() {
        let mut s = small_spec();
        s.duration = 2.2;
        let r = run_in_memory(&s).await;
        // The whole seconds of the run, adding up to no more than the total.
        assert_eq!(r.per_second.len(), 2, "{:?}", r.per_second);
        let series: u64 = r.per_second.iter().map(|s| s.ops).sum();
        assert!(series > 0 && series <= r.total.count, "{series}");
        for (i, sec) in r.per_second.iter().enumerate() {
            assert_eq!(sec.t, i as u64);
            assert!(sec.ops > 0 && sec.iops == sec.ops as f64 && sec.mib_s > 0.0);
        }
    }

    #[tokio::test]
    async fn metadata_loop_runs_on_any_fs() {
        let mut s = small_spec();
        s.mode = Mode::Metadata;
        s.threads = 2;
        s.queue_depth = 1;
        s.md_files = 4;
        let r = run_in_memory(&s).await;
        for op in ["create", "open", "close", "query_info", "delete"] {
            assert!(r.ops[op].count > 0, "{op}");
        }
        let ids: Vec<&str> = r.advice.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["metadata_heavy"], "{}", r.to_text());
        assert!(r.to_text().contains("advice [metadata_heavy]"));
    }

    #[tokio::test]
    async fn a_queue_depth_1_small_io_run_gets_its_advice() {
        let mut s = small_spec();
        s.threads = 1;
        s.queue_depth = 1;
        s.read_pct = 100;
        s.random = true;
        let r = run_in_memory(&s).await;
        let ids: Vec<&str> = r.advice.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["single_request_small_io"], "{}", r.to_text());
        // Sixteen in flight, 1 MiB, over 4 files, one channel: multichannel.
        s.queue_depth = 16;
        s.io_size = 1 << 20;
        s.files = 4;
        s.file_size = 4 << 20;
        let info = ServerInfo {
            multichannel_offered: true,
            interfaces: vec!["127.0.0.1".into()],
            ..Default::default()
        };
        let mut r = run_on(Arc::new(MemFs::default()), &s, false, &info, &[])
            .await
            .unwrap();
        r.protocol = "smb".into();
        let ids: Vec<String> = braid_advisor::advise(&r.workload())
            .into_iter()
            .map(|a| a.id)
            .collect();
        assert_eq!(ids, ["one_channel_parallel_io"], "{}", r.to_text());
    }

    #[test]
    fn pattern_round_trips() {
        let b = pattern(3, 4096, 8192);
        assert!(check_pattern(3, 4096, &b));
        assert!(!check_pattern(4, 4096, &b));
        assert!(!check_pattern(3, 0, &b));
    }
}
