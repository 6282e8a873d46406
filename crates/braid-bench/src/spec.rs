//! What one bench run does: target, load shape, security, channels.

use serde::{Deserialize, Serialize};

/// I/O load or metadata loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Io,
    Metadata,
}

/// How the session protects its traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Security {
    /// SMB 3.0.2 without signing (3.1.1 sessions always sign), unless the
    /// server requires signing.
    Plain,
    /// SMB 3.1.1, signed (AES-GMAC when the server offers it).
    #[default]
    Sign,
    /// SMB 3.1.1, every message encrypted (AES-128-GCM preferred).
    Encrypt,
}

impl Security {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "plain" | "none" => Ok(Security::Plain),
            "sign" | "signed" | "signing" => Ok(Security::Sign),
            "encrypt" | "encrypted" | "encryption" => Ok(Security::Encrypt),
            o => Err(format!("security '{o}': use plain, sign or encrypt")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Security::Plain => "plain",
            Security::Sign => "sign",
            Security::Encrypt => "encrypt",
        }
    }
}

/// The protocol of a target: `//HOST/SHARE` is SMB, `nfs://HOST/EXPORT` NFSv4.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Smb,
    Nfs,
}

impl Protocol {
    pub fn of(target: &str) -> Protocol {
        if target
            .get(..6)
            .is_some_and(|p| p.eq_ignore_ascii_case("nfs://"))
        {
            Protocol::Nfs
        } else {
            Protocol::Smb
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Smb => "smb",
            Protocol::Nfs => "nfs",
        }
    }
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    /// `//HOST[:PORT]/SHARE` (SMB) or `nfs://HOST[:PORT]/EXPORT` (NFSv4.1).
    pub target: String,
    pub user: String,
    #[serde(skip_serializing, default)]
    pub password: String,
    #[serde(default)]
    pub domain: String,
    /// Profile the run started from, if any.
    #[serde(default)]
    pub profile: Option<String>,
    pub mode: Mode,
    /// Measured seconds (after the warm-up).
    pub duration: f64,
    /// Warm-up seconds, discarded.
    pub warmup: f64,
    pub io_size: u32,
    /// Percentage of reads (the rest are writes).
    pub read_pct: u8,
    pub random: bool,
    pub threads: u32,
    /// Requests in flight per thread.
    pub queue_depth: u32,
    pub files: u32,
    pub file_size: u64,
    /// Connections per server interface (1..16) when multichannel is on.
    pub channels: u32,
    pub multichannel: bool,
    pub security: Security,
    /// Check read data against the pattern the files were written with.
    pub verify: bool,
    /// Directory inside the share holding the bench files.
    pub dir: String,
    /// Metadata mode: files cycled through per task.
    pub md_files: u32,
    /// Override the addresses channels are opened to (default: the
    /// server's FSCTL_QUERY_NETWORK_INTERFACE_INFO answer, or the target).
    #[serde(default)]
    pub connect_to: Vec<String>,
    /// NFS: TCP connections per server address, one session (Linux's
    /// `nconnect`), 1..16.
    #[serde(default = "one")]
    pub nconnect: u32,
    /// NFS: the AUTH_SYS uid and gid.
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub gid: u32,
    /// The server's process on this machine, if it runs here: its CPU over
    /// the measured window goes into the report.
    #[serde(default)]
    pub server_pid: Option<u32>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            target: String::new(),
            user: String::new(),
            password: String::new(),
            domain: String::new(),
            profile: None,
            mode: Mode::Io,
            duration: 10.0,
            warmup: 2.0,
            io_size: 64 * 1024,
            read_pct: 100,
            random: true,
            threads: 1,
            queue_depth: 8,
            files: 1,
            file_size: 64 << 20,
            channels: 1,
            multichannel: false,
            security: Security::Sign,
            verify: false,
            dir: "braid-bench".into(),
            md_files: 64,
            connect_to: Vec::new(),
            nconnect: 1,
            uid: 0,
            gid: 0,
            server_pid: None,
        }
    }
}

/// `nfs://HOST[:PORT]/EXPORT[/MORE]` split into host, port (default
/// 2049) and the export's path ("/EXPORT/MORE").
pub fn parse_nfs_target(t: &str) -> Result<(String, u16, String), String> {
    if Protocol::of(t) != Protocol::Nfs {
        return Err(format!("target '{t}': use nfs://HOST[:PORT]/EXPORT"));
    }
    let rest = &t[6..];
    let (hostport, path) = rest
        .split_once('/')
        .ok_or_else(|| format!("target '{t}': no export (use nfs://HOST[:PORT]/EXPORT)"))?;
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        return Err(format!(
            "target '{t}': no export (use nfs://HOST[:PORT]/EXPORT)"
        ));
    }
    let (host, port) = split_host_port(hostport, t)?;
    Ok((host, port.unwrap_or(2049), format!("/{path}")))
}

fn split_host_port(hostport: &str, t: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
        let (h, p) = h
            .split_once(']')
            .ok_or_else(|| format!("target '{t}': bad IPv6 address"))?;
        (h.to_string(), p.strip_prefix(':').unwrap_or(""))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p),
            None => (hostport.to_string(), ""),
        }
    };
    if host.is_empty() {
        return Err(format!("target '{t}': no host"));
    }
    let port = if port.is_empty() {
        None
    } else {
        Some(
            port.parse()
                .map_err(|_| format!("target '{t}': bad port '{port}'"))?,
        )
    };
    Ok((host, port))
}

/// `//HOST[:PORT]/SHARE` (or `\\HOST\SHARE`) split into host, port, share.
pub fn parse_target(t: &str) -> Result<(String, u16, String), String> {
    let s = t.replace('\\', "/");
    let rest = s
        .strip_prefix("//")
        .ok_or_else(|| format!("target '{t}': use //HOST[:PORT]/SHARE"))?;
    let (hostport, share) = rest
        .split_once('/')
        .ok_or_else(|| format!("target '{t}': no share (use //HOST[:PORT]/SHARE)"))?;
    let share = share.trim_end_matches('/');
    if share.is_empty() || share.contains('/') {
        return Err(format!("target '{t}': bad share name"));
    }
    let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
        // [v6]:port
        let (h, p) = h
            .split_once(']')
            .ok_or_else(|| format!("target '{t}': bad IPv6 address"))?;
        (h.to_string(), p.strip_prefix(':').unwrap_or(""))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p),
            None => (hostport.to_string(), ""),
        }
    };
    let port = if port.is_empty() {
        445
    } else {
        port.parse()
            .map_err(|_| format!("target '{t}': bad port '{port}'"))?
    };
    if host.is_empty() {
        return Err(format!("target '{t}': no host"));
    }
    Ok((host, port, share.to_string()))
}

/// `4k`, `64K`, `1m`, `1MiB`, `512` (bytes).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let l = s.trim().to_ascii_lowercase();
    let l = l.trim_end_matches("ib").trim_end_matches('b');
    let (num, mul) = match l.chars().last() {
        Some('k') => (&l[..l.len() - 1], 1u64 << 10),
        Some('m') => (&l[..l.len() - 1], 1 << 20),
        Some('g') => (&l[..l.len() - 1], 1 << 30),
        _ => (l, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size '{s}': use e.g. 4k, 64k, 1m, 1g"))?;
    Ok(n * mul)
}

/// 4096 -> "4k", 1048576 -> "1m".
pub fn size_name(n: u64) -> String {
    if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
        format!("{}g", n >> 30)
    } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}m", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{}k", n >> 10)
    } else {
        n.to_string()
    }
}

impl Spec {
    pub fn protocol(&self) -> Protocol {
        Protocol::of(&self.target)
    }

    pub fn validate(&self) -> Result<(), String> {
        match self.protocol() {
            Protocol::Smb => {
                parse_target(&self.target)?;
                if self.user.is_empty() {
                    return Err("--user is required".into());
                }
            }
            Protocol::Nfs => {
                parse_nfs_target(&self.target)?;
            }
        }
        if !(1..=16).contains(&self.channels) {
            return Err(format!("channels = {}: use 1..16", self.channels));
        }
        if !(1..=16).contains(&self.nconnect) {
            return Err(format!("nconnect = {}: use 1..16", self.nconnect));
        }
        if self.threads == 0 || self.queue_depth == 0 {
            return Err("threads and queue depth must be at least 1".into());
        }
        if self.threads * self.queue_depth > 4096 {
            return Err("threads x queue depth above 4096".into());
        }
        if self.mode == Mode::Io {
            if self.io_size < 512 || self.io_size > 8 << 20 || !self.io_size.is_multiple_of(512) {
                return Err(format!(
                    "I/O size {}: use a multiple of 512 up to 8 MiB",
                    self.io_size
                ));
            }
            if self.files == 0 {
                return Err("files must be at least 1".into());
            }
            if self.file_size < self.io_size as u64 {
                return Err("file size below the I/O size".into());
            }
            if self.read_pct > 100 {
                return Err("read percentage above 100".into());
            }
        }
        if self.duration.is_nan() || self.duration <= 0.0 || self.warmup < 0.0 {
            return Err("duration must be positive, warm-up not negative".into());
        }
        Ok(())
    }

    /// One-line description of the load.
    pub fn describe(&self) -> String {
        match self.mode {
            Mode::Metadata => format!(
                "metadata loops, {} threads x QD {}, {} files per task",
                self.threads, self.queue_depth, self.md_files
            ),
            Mode::Io => format!(
                "{} {} {}% read, {} threads x QD {}, {} file(s) x {}",
                if self.random { "random" } else { "sequential" },
                size_name(self.io_size as u64),
                self.read_pct,
                self.threads,
                self.queue_depth,
                self.files,
                size_name(self.file_size)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("//127.0.0.1:4445/share").unwrap(),
            ("127.0.0.1".into(), 4445, "share".into())
        );
        assert_eq!(
            parse_target("\\\\srv\\data").unwrap(),
            ("srv".into(), 445, "data".into())
        );
        assert_eq!(parse_target("//[::1]:99/s").unwrap().1, 99);
        assert!(parse_target("srv/share").is_err());
        assert!(parse_target("//srv").is_err());
        assert_eq!(
            parse_nfs_target("nfs://127.0.0.1:20490/share").unwrap(),
            ("127.0.0.1".into(), 20490, "/share".into())
        );
        assert_eq!(
            parse_nfs_target("NFS://srv/a/b/").unwrap(),
            ("srv".into(), 2049, "/a/b".into())
        );
        assert_eq!(parse_nfs_target("nfs://[::1]:99/e").unwrap().1, 99);
        assert!(parse_nfs_target("nfs://srv").is_err());
        assert!(parse_nfs_target("nfs://srv/").is_err());
        assert_eq!(Protocol::of("nfs://h/e"), Protocol::Nfs);
        assert_eq!(Protocol::of("//h/s"), Protocol::Smb);
        let mut s = Spec {
            target: "nfs://h/e".into(),
            ..Spec::default()
        };
        assert!(s.validate().is_ok(), "no user needed for NFS");
        s.nconnect = 17;
        assert!(s.validate().is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(size_name(65536), "64k");
        assert_eq!(size_name(1 << 20), "1m");
    }
}
