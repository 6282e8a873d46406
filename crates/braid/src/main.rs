//! The `braid` binary: `braid serve`, `braid user`, `braid status`.

mod bench_cli;
mod config;
mod status;
mod status_shares;
mod vfs_cli;

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use braid_server::userdb::UserDb;
use braid_server::users_live::LiveUsers;
use braid_server::{Server, ServerConfig, ShareConfig};
use clap::{Parser, Subcommand};

/// The embedded default: `braid serve` with no arguments.
const DEFAULT_LISTEN: &str = "127.0.0.1:4445";
/// NFS's 2049 behind a 20, loopback only; the embedded share is exported
/// to loopback clients alone.
const DEFAULT_NFS_LISTEN: &str = "127.0.0.1:20490";
const DEFAULT_NFS_CLIENTS: &str = "127.0.0.0/8 rw";
const DEFAULT_SHARE: (&str, &str) = ("share", "braid-share");
const DEFAULT_USER: (&str, &str) = ("braid", "braid");
const DEFAULT_USERS_FILE: &str = "braid-users";

#[derive(Parser)]
#[command(name = "braid", version, about = "Braid: an SMB 3.1.1 file server")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve shares over SMB.
    Serve(ServeArgs),
    /// Manage the users file.
    User {
        #[command(subcommand)]
        cmd: UserCmd,
    },
    /// Sessions and channels (or open files) of a running server, from its
    /// admin API.
    Status {
        /// The server's admin API address (its admin_listen).
        #[arg(long, default_value = braid_server::config::DEFAULT_ADMIN_LISTEN)]
        admin: String,
        /// Print the API's JSON as is.
        #[arg(long)]
        json: bool,
        /// The open files (and who holds them) instead of the sessions.
        #[arg(long)]
        opens: bool,
        /// Each share's provisioned performance (QoS) and use instead.
        #[arg(long, conflicts_with_all = ["opens", "advice"])]
        shares: bool,
        /// The advisor's findings on each session's last minute of work
        /// (`/api/v1/advice`), each with its evidence.
        #[arg(long, conflicts_with = "opens")]
        advice: bool,
        /// The file holding the admin API's token (its admin_token_file).
        #[arg(long)]
        admin_token_file: Option<PathBuf>,
    },
    /// Load generator: run a profile against any SMB server, list
    /// profiles, compare targets/settings into an HTML report.
    Bench(Box<bench_cli::BenchArgs>),
    /// Network lab (root only): namespaces with rate-limited NICs, Braid in
    /// one, a bench from the other.
    Lab(bench_cli::LabArgs),
    /// Work on a share's files from this host (Samba's `net vfs`).
    Vfs {
        #[command(subcommand)]
        cmd: vfs_cli::VfsCmd,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML config file (see docs/CONFIG.md); flags below add to it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on (repeatable), e.g. 127.0.0.1:4445.
    #[arg(long)]
    listen: Vec<String>,
    /// NFSv4.1 address to listen on (repeatable), e.g. 127.0.0.1:20490;
    /// "off": no NFS.
    #[arg(long)]
    nfs_listen: Vec<String>,
    /// Share a directory: NAME=PATH (repeatable).
    #[arg(long)]
    share: Vec<String>,
    /// A user for this run only: NAME:PASSWORD (repeatable).
    #[arg(long)]
    user: Vec<String>,
    /// Users file managed by `braid user add`.
    #[arg(long)]
    users_file: Option<PathBuf>,
    /// Signing policy: required (default) or enabled.
    #[arg(long)]
    signing: Option<String>,
    /// Allow anonymous sessions.
    #[arg(long)]
    allow_guest: bool,
    /// Require SMB3 encryption on every session.
    #[arg(long)]
    encrypt: bool,
    /// Resolve every share's names through the metadata cache, whatever
    /// its [[share]] says (the default: `metadata_cache = true`).
    #[arg(long, conflicts_with = "no_metadata_cache")]
    metadata_cache: bool,
    /// Turn the metadata cache off on every share, whatever its [[share]]
    /// says (`metadata_cache = false` in each), e.g. to measure it on
    /// against off.
    #[arg(long)]
    no_metadata_cache: bool,
    /// Admin HTTP API address (default 127.0.0.1:9445), or "off".
    #[arg(long)]
    admin_listen: Option<String>,
    /// A file (mode 0600) holding the bearer token the admin API requires.
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Log filter, e.g. info, debug, braid_server=trace.
    #[arg(long, default_value = "info")]
    log: String,
}

#[derive(Subcommand)]
enum UserCmd {
    /// Add or update a user; the password is prompted for, or read from stdin.
    Add {
        name: String,
        #[arg(long, default_value = DEFAULT_USERS_FILE)]
        users_file: PathBuf,
        /// The Unix uid the user's new files and directories get (with
        /// --gid), so NFS clients see the same owner; an update without it
        /// keeps the one the file has.
        #[arg(long, requires = "gid")]
        uid: Option<u32>,
        /// The Unix gid of the user's new files and directories (with --uid).
        #[arg(long, requires = "uid")]
        gid: Option<u32>,
    },
    /// Remove a user.
    Remove {
        name: String,
        #[arg(long, default_value = DEFAULT_USERS_FILE)]
        users_file: PathBuf,
    },
    /// List users.
    List {
        #[arg(long, default_value = DEFAULT_USERS_FILE)]
        users_file: PathBuf,
    },
}

// mimalloc rather than glibc's malloc: each large request frame is a fresh
// 1-8 MiB buffer, freed on whichever thread finished with it. With mimalloc
// the server took 4-13% less CPU per GiB written (1 MiB WRITEs, plain,
// signed and encrypted) and its resident memory after a mixed load fell from
// 223 MB (glibc keeps its arenas) to 33 MB; reads and 4 KiB I/O unchanged
// (docs/BENCHMARKS.md, run 24).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Serve(args) => serve(args),
        Cmd::User { cmd } => user(cmd),
        Cmd::Status {
            admin,
            json,
            opens,
            shares,
            advice,
            admin_token_file,
        } => status::run(
            &admin,
            json,
            opens,
            shares,
            advice,
            admin_token_file.as_deref(),
        ),
        Cmd::Bench(args) => bench_cli::bench(*args),
        Cmd::Lab(args) => bench_cli::lab_cmd(args),
        Cmd::Vfs { cmd } => vfs_cli::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("braid: {e}");
            ExitCode::from(2)
        }
    }
}

fn read_password() -> Result<String, String> {
    if std::io::stdin().is_terminal() {
        let p = rpassword::prompt_password("Password: ")
            .map_err(|e| format!("reading password: {e}"))?;
        let again =
            rpassword::prompt_password("Again: ").map_err(|e| format!("reading password: {e}"))?;
        if p != again {
            return Err("passwords differ".into());
        }
        Ok(p)
    } else {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| format!("reading password: {e}"))?;
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }
}

fn user(cmd: UserCmd) -> Result<(), String> {
    match cmd {
        UserCmd::Add {
            name,
            users_file,
            uid,
            gid,
        } => {
            let owner = match (uid, gid) {
                (Some(uid), Some(gid)) if uid != u32::MAX && gid != u32::MAX => {
                    Some(braid_fs::FileOwner { uid, gid })
                }
                (None, None) => None,
                _ => return Err("--uid and --gid: give both, each below 4294967295".into()),
            };
            let password = read_password()?;
            if password.is_empty() {
                return Err("empty password refused".into());
            }
            UserDb::add_user_hash(
                &users_file,
                &name,
                braid_smb_proto::auth::nt_hash(&password),
                owner,
            )
            .map_err(|e| e.to_string())?;
            println!("user '{name}' saved in {}", users_file.display());
        }
        UserCmd::Remove { name, users_file } => {
            if !UserDb::remove_user(&users_file, &name).map_err(|e| e.to_string())? {
                return Err(format!("user '{name}' is not in {}", users_file.display()));
            }
            println!("user '{name}' removed from {}", users_file.display());
        }
        UserCmd::List { users_file } => {
            let db = UserDb::load(&users_file).map_err(|e| e.to_string())?;
            for u in db.list() {
                println!("{u}");
            }
        }
    }
    Ok(())
}

fn build(args: &ServeArgs) -> Result<(ServerConfig, LiveUsers, bool), String> {
    let file = match &args.config {
        Some(p) => config::load(p)?,
        None => config::FileConfig::default(),
    };
    let embedded = args.config.is_none()
        && args.listen.is_empty()
        && args.share.is_empty()
        && args.user.is_empty()
        && args.users_file.is_none();
    let mut cfg = ServerConfig::default();

    let mut listen: Vec<String> = file.listen.clone().unwrap_or_default();
    listen.extend(args.listen.iter().cloned());
    if listen.is_empty() {
        listen.push(DEFAULT_LISTEN.to_string());
    }
    cfg.listen = listen
        .iter()
        .map(|s| config::parse_listen(s))
        .collect::<Result<_, _>>()?;

    cfg.nfs_listen = nfs_listen(args, &file, embedded)?;
    let (lease, grace) = config::nfs_times(file.nfs_lease_time_secs, file.nfs_grace_time_secs)?;
    cfg.nfs_lease_time = lease;
    cfg.nfs_grace_time = grace;
    if let Some(dir) = &file.state_dir {
        config::prepare_state_dir(dir)?;
        cfg.state_dir = Some(dir.clone());
    }
    cfg.state_store = config::state_store(&file)?;
    let mut shares = file.shares;
    // Shares given by flag have no other way to be opened to guests:
    // `--allow-guest` opens them (`[[share]]` tables say `guest_ok`).
    for s in &args.share {
        let mut share = config::parse_share_flag(s)?;
        share.guest_ok = args.allow_guest;
        shares.push(share);
    }
    if embedded {
        let dir = PathBuf::from(DEFAULT_SHARE.1);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut share = config::ShareEntry::new(DEFAULT_SHARE.0, dir);
        share.guest_ok = args.allow_guest;
        // NFS's AUTH_SYS believes the uid a client claims: loopback only.
        share.nfs_clients = Some(vec![DEFAULT_NFS_CLIENTS.into()]);
        shares.push(share);
    }
    if shares.is_empty() {
        return Err("no shares: add --share NAME=PATH or a [[share]] table in the config".into());
    }
    let mut seen = std::collections::HashSet::new();
    for s in &shares {
        config::validate_share_name(&s.name)?;
        if !seen.insert(s.name.to_lowercase()) {
            return Err(format!("share '{}' is defined twice", s.name));
        }
        let (mut served, is_homes) = served_share(s)?;
        served.metadata_cache = metadata_cache(args, s.metadata_cache);
        if is_homes {
            cfg.homes = Some(served);
        } else {
            cfg.shares.push(served);
        }
    }

    let signing = args
        .signing
        .clone()
        .or(file.signing)
        .unwrap_or_else(|| "required".into());
    cfg.signing_required = match signing.as_str() {
        "required" => true,
        "enabled" => false,
        other => {
            return Err(format!(
                "signing = '{other}': use \"required\" or \"enabled\""
            ))
        }
    };
    cfg.allow_guest = args.allow_guest || file.allow_guest.unwrap_or(false);
    if !cfg.allow_guest {
        for s in cfg.shares.iter().filter(|s| s.access.guest_ok) {
            tracing::warn!(
                share = %s.name,
                "guest_ok has no effect while anonymous sessions are refused: \
                 set allow_guest = true (or --allow-guest) for guests to reach it"
            );
        }
    }
    if let Some(m) = file.max_io_size {
        if !(65536..=8 * 1024 * 1024).contains(&m) {
            return Err(format!(
                "max_io_size = {m}: use a value from 65536 to 8388608"
            ));
        }
        cfg.max_io_size = m;
        cfg.max_transact_size = m;
    }
    if let Some(c) = file.max_credits {
        if c < 16 {
            return Err(format!("max_credits = {c}: use at least 16"));
        }
        cfg.max_credits = c;
    }
    if let Some(t) = file.idle_timeout_secs {
        if t < 10 {
            return Err(format!("idle_timeout_secs = {t}: use at least 10"));
        }
        cfg.idle_timeout = std::time::Duration::from_secs(t);
    }
    cfg.encrypt = args.encrypt || file.encrypt.unwrap_or(false);
    check_nfs_exports(&cfg)?;
    if let Some(list) = &file.ciphers {
        if list.is_empty() {
            return Err("ciphers = []: list at least one cipher, e.g. [\"aes-128-gcm\"]".into());
        }
        cfg.ciphers = list
            .iter()
            .map(|c| config::parse_cipher(c))
            .collect::<Result<_, _>>()?;
    }
    cfg.multichannel = file.multichannel.unwrap_or(true);
    cfg.leases = file.leases.unwrap_or(true);
    cfg.operation_metrics = file.operation_metrics.unwrap_or(true);
    if let Some(m) = file.max_channels {
        if !(1..=256).contains(&m) {
            return Err(format!("max_channels = {m}: use a value from 1 to 256"));
        }
        cfg.max_channels = m as usize;
    }
    let nofile = raise_open_file_limit();
    cfg.max_open_files = default_max_open_files(nofile);
    if let Some(m) = file.max_open_files {
        if !(16..=1_000_000).contains(&m) {
            return Err(format!(
                "max_open_files = {m}: use a value from 16 to 1000000"
            ));
        }
        cfg.max_open_files = m as usize;
        if nofile.is_some_and(|n| n < 2 * u64::from(m)) {
            tracing::warn!(
                nofile,
                max_open_files = m,
                "the open file limit (ulimit -n) is less than twice max_open_files: \
                 one client can leave too few descriptors for the others; raise the \
                 hard limit (LimitNOFILE= under systemd) or lower max_open_files"
            );
        }
    }
    cfg.max_open_files_per_client = default_max_open_files_per_client(nofile);
    if let Some(m) = file.max_open_files_per_client {
        if !(16..=1_000_000).contains(&m) {
            return Err(format!(
                "max_open_files_per_client = {m}: use a value from 16 to 1000000"
            ));
        }
        cfg.max_open_files_per_client = m as usize;
    }
    if let Some(m) = file.max_connections {
        if !(1..=1_000_000).contains(&m) {
            return Err(format!(
                "max_connections = {m}: use a value from 1 to 1000000"
            ));
        }
        cfg.max_connections = m as usize;
    }
    cfg.max_connections_per_client = default_max_connections_per_client(cfg.max_connections);
    if let Some(m) = file.max_connections_per_client {
        if !(1..=1_000_000).contains(&m) {
            return Err(format!(
                "max_connections_per_client = {m}: use a value from 1 to 1000000"
            ));
        }
        cfg.max_connections_per_client = m as usize;
    }
    if let Some(m) = file.metadata_cache_max_entries {
        if !(1_000..=100_000_000).contains(&m) {
            return Err(format!(
                "metadata_cache_max_entries = {m}: use a value from 1000 to 100000000"
            ));
        }
        cfg.metadata_cache_max_entries = m;
    }
    if let Some(m) = file.metadata_cache_max_mib {
        if !(1..=65_536).contains(&m) {
            return Err(format!(
                "metadata_cache_max_mib = {m}: use a value from 1 to 65536"
            ));
        }
        cfg.metadata_cache_max_bytes = m << 20;
    }
    if let Some(m) = file.metadata_cache_max_fds {
        if m > 65_536 {
            return Err(format!(
                "metadata_cache_max_fds = {m}: use a value from 0 (keep none) to 65536"
            ));
        }
        cfg.metadata_cache_fds.max_fds = m as usize;
    }
    if let Some(m) = file.metadata_cache_fd_idle_ms {
        if !(10..=60_000).contains(&m) {
            return Err(format!(
                "metadata_cache_fd_idle_ms = {m}: use a value from 10 to 60000"
            ));
        }
        cfg.metadata_cache_fds.idle = std::time::Duration::from_millis(m);
    }
    if let Some(m) = file.max_async_requests {
        if !(1..=65_535).contains(&m) {
            return Err(format!(
                "max_async_requests = {m}: use a value from 1 to 65535"
            ));
        }
        cfg.max_async_requests = m as usize;
    }
    cfg.hosts = config::parse_hosts("", &file.hosts_allow, &file.hosts_deny)?;
    if let Some(m) = &file.min_protocol {
        cfg.min_dialect = config::parse_min_protocol(m)?;
    }
    if let Some(n) = file.logon_failures_per_minute {
        cfg.logon_failures_per_minute = n;
    }
    cfg.interfaces = file
        .interfaces
        .iter()
        .map(config::parse_interface)
        .collect::<Result<_, _>>()?;
    if let Some(n) = file.server_name {
        cfg.netbios_name = n;
    }
    if let Some(m) = file.macos_model {
        if m.is_empty() || m.len() > 64 || m.chars().any(char::is_control) {
            return Err(format!(
                "macos_model = {m:?}: give a model name of 1 to 64 printable characters, \
                 e.g. \"MacSamba\" or \"Xserve\""
            ));
        }
        cfg.macos_model = m;
    }

    let admin = args
        .admin_listen
        .as_deref()
        .or(file.admin_listen.as_deref());
    if let Some(a) = admin {
        cfg.admin_listen = config::parse_admin_listen(a)?;
        cfg.admin_listen_is_default = false;
    }
    if let Some(p) = args
        .admin_token_file
        .as_ref()
        .or(file.admin_token_file.as_ref())
    {
        let token = braid_server::admin_auth::AdminToken::from_file(p)?;
        cfg.admin_token = Some(std::sync::Arc::new(token));
    }

    let users_file = args.users_file.clone().or(file.users_file);
    let from_file = match &users_file {
        Some(p) => UserDb::load(p).map_err(|e| e.to_string())?,
        None => UserDb::default(),
    };
    let mut fixed = UserDb::default();
    let mut flag_users: Vec<(String, String)> = args
        .user
        .iter()
        .map(|u| config::parse_user_flag(u))
        .collect::<Result<_, _>>()?;
    if embedded {
        flag_users.push((DEFAULT_USER.0.into(), DEFAULT_USER.1.into()));
    }
    for (n, p) in &flag_users {
        fixed
            .insert_password(n, p)
            .map_err(|e| format!("--user {n}: {e}"))?;
    }
    // With a users file, users may be added later (`braid user add`):
    // an empty file is fine then.
    if users_file.is_none() && fixed.is_empty() && !cfg.allow_guest {
        return Err("no users: add --user NAME:PASSWORD, --users-file FILE (see `braid user add`), or users_file in the config".into());
    }
    let users = match users_file {
        Some(path) => LiveUsers::with_file(path, from_file, fixed),
        None => fixed.into(),
    };
    Ok((cfg, users, embedded))
}

/// Every connection and every open holds a file descriptor, in one
/// process: raise the soft RLIMIT_NOFILE to the hard limit, as Samba
/// does. Returns the soft limit now, if it could be read.
fn raise_open_file_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    Some(lim.rlim_cur)
}

/// The process umask (read by setting it and setting it back, before any
/// thread runs).
fn current_umask() -> u32 {
    // SAFETY: umask only swaps the process's file mode creation mask.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

/// `max_open_files` when the config does not set it: Samba's 16384, but
/// at most a quarter of the descriptors the process may have, so that one
/// client cannot take them all.
fn default_max_open_files(nofile: Option<u64>) -> usize {
    let quarter = nofile.map_or(u64::MAX, |n| (n / 4).max(16));
    quarter.min(16384) as usize
}

/// `max_open_files_per_client` when the config does not set it: half the
/// descriptors the process may have, so that no one client address, with
/// however many sessions, can take them all.
fn default_max_open_files_per_client(nofile: Option<u64>) -> usize {
    nofile.map_or(1_000_000, |n| (n / 2).clamp(16, 1_000_000)) as usize
}

/// `max_connections_per_client` when the config does not set it: a quarter
/// of the server's connections, so that no one client address takes them
/// all, but never fewer than 64 (a multichannel client opens up to 32 per
/// session), or than `max_connections` when that is less.
fn default_max_connections_per_client(max_connections: usize) -> usize {
    (max_connections / 4).max(max_connections.min(64))
}

/// `nfs_listen` and `--nfs-listen`: the config's addresses followed by
/// the flags', or none with `--nfs-listen off`; the embedded default
/// listens on DEFAULT_NFS_LISTEN unless told otherwise (or asked to
/// encrypt, which NFS cannot yet).
fn nfs_listen(
    args: &ServeArgs,
    file: &config::FileConfig,
    embedded: bool,
) -> Result<Vec<std::net::SocketAddr>, String> {
    let off = |a: &String| a.trim().eq_ignore_ascii_case("off");
    if args.nfs_listen.iter().any(off) {
        if args.nfs_listen.len() > 1 {
            return Err(
                "--nfs-listen off turns NFS off: give it alone, or give addresses without it"
                    .into(),
            );
        }
        return Ok(Vec::new());
    }
    let mut list: Vec<String> = file.nfs_listen.clone().unwrap_or_default();
    list.extend(args.nfs_listen.iter().cloned());
    if list.is_empty() && embedded && !args.encrypt {
        list.push(DEFAULT_NFS_LISTEN.to_string());
    }
    list.iter().map(|a| config::parse_nfs_listen(a)).collect()
}

/// NFS settings that make sense only together: encryption NFS cannot give
/// yet, and exports any client could write to as anyone (warned).
fn check_nfs_exports(cfg: &ServerConfig) -> Result<(), String> {
    if cfg.nfs_listen.is_empty() {
        return Ok(());
    }
    let exported: Vec<&ShareConfig> = cfg.shares.iter().filter(|s| s.protocols.nfs).collect();
    if exported.is_empty() {
        tracing::warn!(
            "nfs_listen is set but no share is exported over NFS: \
             add \"nfs\" to a share's protocols, or remove nfs_listen"
        );
    }
    if cfg.encrypt && !exported.is_empty() {
        return Err(
            "encrypt = true (or --encrypt): NFS cannot encrypt yet (no krb5p); \
             set protocols = [\"smb\"] on every share, or turn NFS off with \
             nfs_listen = [] or --nfs-listen off"
                .into(),
        );
    }
    if let Some(s) = exported.iter().find(|s| s.encrypt) {
        return Err(format!(
            "share '{}': encrypt = true, but NFS cannot encrypt yet (no krb5p); \
             add protocols = [\"smb\"] to the share, or remove encrypt",
            s.name
        ));
    }
    let beyond_loopback = cfg.nfs_listen.iter().any(|a| !a.ip().is_loopback());
    for s in exported.iter().filter(|s| s.nfs.clients.is_empty()) {
        if beyond_loopback {
            tracing::warn!(
                share = %s.name,
                "exported over NFS to every client the server admits, and AUTH_SYS \
                 trusts the uid a client claims: list the clients in nfs_clients"
            );
        }
    }
    Ok(())
}

/// What `braid serve` prints for an NFS listener and an exported share:
/// the mount command that reaches it.
fn nfs_mount_line(addr: std::net::SocketAddr, share: &str) -> String {
    let host = match addr.ip() {
        ip if ip.is_unspecified() => "SERVER".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    format!(
        "braid: NFSv4.1/4.2 on {addr}: mount -t nfs4 -o vers=4.1,port={} {host}:/{share} /mnt",
        addr.port()
    )
}

fn serve(args: ServeArgs) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .map_err(|e| format!("--log '{}': {e}", args.log))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colour codes only for a terminal, not in a log file or journal.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let (cfg, users, embedded) = build(&args)?;
    let args = std::sync::Arc::new(args);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting runtime: {e}"))?;
    let served = rt.block_on(async move {
        let mut shares: Vec<String> = cfg.shares.iter().map(|s| format!("{}={}", s.name, s.path.display())).collect();
        if let Some(h) = &cfg.homes {
            shares.push(format!("(each user's own)={}", h.path.display()));
        }
        let nfs_on = !cfg.nfs_listen.is_empty();
        for (line, s) in shares.iter_mut().zip(&cfg.shares) {
            match (s.protocols.smb, s.protocols.nfs && nfs_on) {
                (false, _) => line.push_str(" (NFS only)"),
                (true, false) if nfs_on => line.push_str(" (SMB only)"),
                _ => {}
            }
        }
        let nfs_exports: Vec<String> = cfg
            .shares
            .iter()
            .filter(|s| s.protocols.nfs)
            .map(|s| s.name.clone())
            .collect();
        let server = Server::bind(cfg, users).await?;
        // SIGHUP reads the config file and flags again (`reload.rs`).
        let source = args.clone();
        server.set_config_source(std::sync::Arc::new(move || build(&source).map(|(cfg, _, _)| cfg)));
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| format!("SIGHUP handler: {e}"))?;
        let state = server.state.clone();
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                if let Err(e) = braid_server::reload::reload(&state).await {
                    tracing::error!("reload: {e}; the running config stays in force");
                }
            }
        });
        for a in server.local_addrs() {
            println!("braid: listening on {a}");
        }
        if let Some(a) = server.admin_addr() {
            println!("braid: admin API on http://{a}/");
        }
        println!("braid: shares {}", shares.join(", "));
        for a in server.nfs_local_addrs() {
            for name in &nfs_exports {
                println!("{}", nfs_mount_line(a, name));
            }
        }
        if embedded {
            println!(
                "braid: embedded default: user '{}' password '{}' (loopback only; use --user or a users file for anything else)",
                DEFAULT_USER.0, DEFAULT_USER.1
            );
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let state = server.state.clone();
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
        let mut serving = tokio::spawn(server.run());
        let ended = tokio::select! {
            _ = &mut serving => true,
            _ = tokio::signal::ctrl_c() => false,
            _ = terminate.recv() => false,
        };
        // A graceful stop (SIGTERM, SIGINT; braid-server `stop.rs`): no new
        // connection or request, running requests finish, then durable
        // opens are kept for the next start (persistent ones already are).
        println!("braid: stopping");
        let kept = Server::stop(&state, (!ended).then_some(serving)).await;
        if kept > 0 {
            println!("braid: {kept} durable open(s) kept in the state store for the next start");
        }
        Ok(())
    });
    // A request stuck in the file system (a hung mount) would hold the
    // exit for ever on its blocking thread; its state is saved already.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    served
}

/// One `[[share]]` table (or `--share` flag) checked and turned into what
/// the server serves; true for the `homes` template.
/// Whether a share with `metadata_cache = share` (None: not said) gets
/// the cache: on unless the share says false; `--metadata-cache` and
/// `--no-metadata-cache` decide for every share, whatever it says.
fn metadata_cache(args: &ServeArgs, share: Option<bool>) -> bool {
    if args.metadata_cache {
        true
    } else if args.no_metadata_cache {
        false
    } else {
        metadata_cache_by_default(share)
    }
}

/// On by default: it earned it by passing every list with it on
/// (docs/BENCHMARKS.md section 9, "Default").
fn metadata_cache_by_default(share: Option<bool>) -> bool {
    share.unwrap_or(true)
}

fn served_share(s: &config::ShareEntry) -> Result<(ShareConfig, bool), String> {
    // Samba's [homes]: a share "homes" whose path holds %U is each
    // user's own share; the directory above the user's must exist.
    let is_homes = s.name.eq_ignore_ascii_case("homes")
        && s.path
            .to_string_lossy()
            .contains(braid_server::smb::homes::USER);
    let checked = if is_homes {
        home_base(&s.path)
    } else {
        s.path.clone()
    };
    let meta = std::fs::metadata(&checked).map_err(|e| {
        format!(
            "share '{}': path {}: {e}; create the directory or fix the path",
            s.name,
            checked.display()
        )
    })?;
    if !meta.is_dir() {
        return Err(format!(
            "share '{}': path {} is not a directory",
            s.name,
            s.path.display()
        ));
    }
    for (key, list) in [("hide_files", &s.hide_files), ("veto_files", &s.veto_files)] {
        for p in list {
            if p.is_empty() || p.contains(['/', '\\']) {
                return Err(format!(
                    "share '{}': {key}: '{p}' is not a file name pattern; \
                     give one name with * and ? wildcards, e.g. \"*.tmp\"",
                    s.name
                ));
            }
        }
    }
    for (key, list) in [
        ("valid_users", &s.valid_users),
        ("read_list", &s.read_list),
        ("write_list", &s.write_list),
    ] {
        if let Some(bad) = list
            .iter()
            .find(|u| u.trim().is_empty() || u.contains(['@', '\\', ':']))
        {
            return Err(format!(
                "share '{}': {key}: '{bad}' is not a user name; \
                 list the names of users of the users file, e.g. [\"alice\", \"bob\"]",
                s.name
            ));
        }
    }
    for (key, mask) in [
        ("create_mask", s.create_mask),
        ("directory_mask", s.directory_mask),
    ] {
        if mask.is_some_and(|m| m > 0o777) {
            return Err(format!(
                "share '{}': {key} = {:#o}: give permission bits only, at most 0o777, e.g. 0o644",
                s.name,
                mask.unwrap_or(0)
            ));
        }
    }
    // Either mask alone leaves the other kind as the umask makes it.
    let create_modes =
        (s.create_mask.is_some() || s.directory_mask.is_some()).then(|| braid_fs::CreateModes {
            file_mask: s.create_mask.unwrap_or(0o666 & !current_umask()),
            directory_mask: s.directory_mask.unwrap_or(0o777 & !current_umask()),
        });
    let snapshots = config::snapshot_config(s)?;
    let mac = config::mac_config(s)?;
    let protocols = config::share_protocols(s, is_homes)?;
    let nfs = config::nfs_export(s, protocols)?;
    let qos = config::qos_limits(s)?;
    let served = ShareConfig {
        qos,
        protocols,
        nfs,
        snapshots,
        mac,
        change_notify: s.change_notify.unwrap_or(true),
        continuous_availability: s.continuous_availability,
        notify_host_changes: s.notify_host_changes.unwrap_or(true),
        name: s.name.clone(),
        path: s.path.clone(),
        encrypt: s.encrypt,
        direct_writes: s.direct_writes.unwrap_or(true),
        posix_locking: s.posix_locking.unwrap_or(true),
        netatalk_locking: s.netatalk_locking,
        named_streams: s.named_streams.unwrap_or(true),
        access_based_enumeration: s.access_based_enumeration,
        hide_dot_files: s.hide_dot_files.unwrap_or(true),
        hide_files: s.hide_files.clone(),
        veto_files: s.veto_files.clone(),
        delete_veto_files: s.delete_veto_files,
        metadata_cache: metadata_cache_by_default(s.metadata_cache),
        create_modes,
        comment: s.comment.clone(),
        browseable: s.browseable.unwrap_or(true),
        canonicalize_acl_flags: s.canonicalize_acl_flags.unwrap_or(true),
        access: braid_server::smb::share_access::ShareAccess {
            read_only: s.read_only,
            valid_users: s.valid_users.clone(),
            read_list: s.read_list.clone(),
            write_list: s.write_list.clone(),
            hosts: config::parse_hosts(
                &format!("share '{}': ", s.name),
                &s.hosts_allow,
                &s.hosts_deny,
            )?,
            guest_ok: s.guest_ok,
        },
    };
    Ok((served, is_homes))
}

/// The directory a home share template's user directories go in: its
/// path up to the component holding `%U`.
fn home_base(template: &std::path::Path) -> PathBuf {
    let mut base = PathBuf::new();
    for c in template.components() {
        if c.as_os_str()
            .to_string_lossy()
            .contains(braid_server::smb::homes::USER)
        {
            break;
        }
        base.push(c);
    }
    base
}

#[cfg(test)]
mod tests {
    use super::{
        check_nfs_exports, default_max_connections_per_client, default_max_open_files,
        default_max_open_files_per_client, nfs_listen, nfs_mount_line, Cli, Cmd, ServeArgs,
    };
    use braid_server::{ServerConfig, ShareConfig};
    use clap::Parser;

    fn serve_args(flags: &[&str]) -> ServeArgs {
        let argv = ["braid", "serve"].iter().chain(flags);
        match Cli::try_parse_from(argv).unwrap().cmd {
            Cmd::Serve(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn nfs_listeners_from_config_flags_and_the_embedded_default() {
        let none = super::config::FileConfig::default();
        let addrs = |flags: &[&str], file: &super::config::FileConfig, embedded| {
            nfs_listen(&serve_args(flags), file, embedded)
                .map(|v| v.iter().map(|a| a.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(addrs(&[], &none, true).unwrap(), ["127.0.0.1:20490"]);
        assert!(
            addrs(&[], &none, false).unwrap().is_empty(),
            "NFS only when asked"
        );
        assert!(addrs(&["--nfs-listen", "off"], &none, true)
            .unwrap()
            .is_empty());
        assert!(
            addrs(&["--encrypt"], &none, true).unwrap().is_empty(),
            "NFS cannot encrypt yet"
        );
        assert_eq!(
            addrs(&["--nfs-listen", "127.0.0.1:0"], &none, true).unwrap(),
            ["127.0.0.1:0"]
        );
        let file = super::config::parse("nfs_listen = [\"0.0.0.0:2049\"]\n").unwrap();
        assert_eq!(
            addrs(&["--nfs-listen", "[::1]:2049"], &file, false).unwrap(),
            ["0.0.0.0:2049", "[::1]:2049"]
        );
        assert!(addrs(&["--nfs-listen", "OFF"], &file, false)
            .unwrap()
            .is_empty());
        let e = addrs(
            &["--nfs-listen", "off", "--nfs-listen", "127.0.0.1:1"],
            &none,
            false,
        )
        .unwrap_err();
        assert!(e.starts_with("--nfs-listen off turns NFS off"), "{e}");
        let e = addrs(&["--nfs-listen", "2049"], &none, false).unwrap_err();
        assert!(
            e.starts_with("nfs_listen: '2049' is not an address:port"),
            "{e}"
        );
    }

    #[test]
    fn nfs_cannot_serve_what_must_be_encrypted() {
        let dir = std::env::temp_dir();
        let mut cfg = ServerConfig {
            shares: vec![ShareConfig::with_defaults("d", &dir)],
            nfs_listen: vec!["127.0.0.1:20490".parse().unwrap()],
            ..ServerConfig::default()
        };
        assert!(check_nfs_exports(&cfg).is_ok());
        cfg.shares[0].encrypt = true;
        let e = check_nfs_exports(&cfg).unwrap_err();
        assert!(
            e.starts_with("share 'd': encrypt = true, but NFS cannot encrypt"),
            "{e}"
        );
        cfg.shares[0].protocols.nfs = false;
        assert!(check_nfs_exports(&cfg).is_ok());
        cfg.shares[0].protocols.nfs = true;
        cfg.shares[0].encrypt = false;
        cfg.encrypt = true;
        let e = check_nfs_exports(&cfg).unwrap_err();
        assert!(
            e.starts_with("encrypt = true (or --encrypt): NFS cannot encrypt"),
            "{e}"
        );
        cfg.nfs_listen.clear();
        assert!(check_nfs_exports(&cfg).is_ok(), "NFS off");
    }

    #[test]
    fn mount_lines_name_the_real_port() {
        assert_eq!(
            nfs_mount_line("127.0.0.1:20490".parse().unwrap(), "share"),
            "braid: NFSv4.1/4.2 on 127.0.0.1:20490: mount -t nfs4 -o vers=4.1,port=20490 127.0.0.1:/share /mnt"
        );
        assert_eq!(
            nfs_mount_line("[::1]:2049".parse().unwrap(), "d"),
            "braid: NFSv4.1/4.2 on [::1]:2049: mount -t nfs4 -o vers=4.1,port=2049 [::1]:/d /mnt"
        );
        assert!(nfs_mount_line("0.0.0.0:2049".parse().unwrap(), "d").contains(" SERVER:/d "));
    }

    #[test]
    fn the_metadata_cache_is_on_unless_a_share_or_a_flag_says_off() {
        let decide = |flags: &[&str], share| super::metadata_cache(&serve_args(flags), share);
        assert!(decide(&[], None), "on by default");
        assert!(decide(&[], Some(true)));
        assert!(!decide(&[], Some(false)), "a share can turn it off");
        assert!(!decide(&["--no-metadata-cache"], None));
        assert!(
            !decide(&["--no-metadata-cache"], Some(true)),
            "the flag wins"
        );
        assert!(decide(&["--metadata-cache"], Some(false)), "the flag wins");
        let both = ["braid", "serve", "--metadata-cache", "--no-metadata-cache"];
        assert!(Cli::try_parse_from(both).is_err(), "one or the other");
    }

    #[test]
    fn one_client_may_have_a_quarter_of_the_connections() {
        assert_eq!(default_max_connections_per_client(16384), 4096);
        assert_eq!(default_max_connections_per_client(1000), 250);
        assert_eq!(default_max_connections_per_client(100), 64);
        assert_eq!(default_max_connections_per_client(4), 4);
    }

    #[test]
    fn one_client_may_hold_at_most_half_the_descriptors() {
        assert_eq!(default_max_open_files_per_client(Some(1_048_576)), 524_288);
        assert_eq!(default_max_open_files_per_client(Some(1024)), 512);
        assert_eq!(default_max_open_files_per_client(Some(8)), 16);
        assert_eq!(default_max_open_files_per_client(Some(u64::MAX)), 1_000_000);
        assert_eq!(default_max_open_files_per_client(None), 1_000_000);
    }

    #[test]
    fn max_open_files_leaves_descriptors_for_other_clients() {
        assert_eq!(
            default_max_open_files(Some(1_048_576)),
            16384,
            "Samba's default"
        );
        assert_eq!(default_max_open_files(Some(20_000)), 5000);
        assert_eq!(default_max_open_files(Some(1024)), 256);
        assert_eq!(
            default_max_open_files(Some(8)),
            16,
            "never below the config minimum"
        );
        assert_eq!(default_max_open_files(None), 16384);
    }
}
