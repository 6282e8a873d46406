//! `braid.toml`: the full configuration, validated into a ServerConfig.
//! Every error is one line naming the key and the fix.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Addresses to listen on, e.g. ["0.0.0.0:445"].
    pub listen: Option<Vec<String>>,
    /// Users database managed by `braid user add`.
    pub users_file: Option<PathBuf>,
    /// "required" (default) or "enabled".
    pub signing: Option<String>,
    /// Allow anonymous sessions (default false).
    pub allow_guest: Option<bool>,
    /// Largest READ/WRITE in bytes (64 KiB .. 8 MiB; default 8 MiB).
    pub max_io_size: Option<u32>,
    /// Credits a connection may hold (default 8192).
    pub max_credits: Option<u16>,
    /// Seconds of silence before a connection is closed (default 900).
    pub idle_timeout_secs: Option<u64>,
    /// NetBIOS name reported to clients (default BRAID).
    pub server_name: Option<String>,
    /// Require SMB3 encryption on every session (default false).
    pub encrypt: Option<bool>,
    /// Cipher preference, e.g. ["aes-128-gcm", "aes-256-gcm", "aes-128-ccm", "aes-256-ccm"].
    pub ciphers: Option<Vec<String>>,
    /// Admin HTTP API address (default "127.0.0.1:9445"); "off" or "" disables it.
    pub admin_listen: Option<String>,
    /// A 0600 file holding the bearer token the admin API then requires.
    pub admin_token_file: Option<PathBuf>,
    /// Offer SMB3 multichannel (default true).
    pub multichannel: Option<bool>,
    /// Grant SMB 2.1+ leases (default true).
    pub leases: Option<bool>,
    /// Channels per session (default 32).
    pub max_channels: Option<u32>,
    /// Opens one session may hold (default 16384).
    pub max_open_files: Option<u32>,
    /// Opens one client address may hold across its sessions (default
    /// half the open-file limit).
    pub max_open_files_per_client: Option<u32>,
    /// TCP connections served at once (default 16384).
    pub max_connections: Option<u32>,
    /// TCP connections one client address may have (default a quarter of
    /// max_connections).
    pub max_connections_per_client: Option<u32>,
    /// Requests of one connection that may wait after an interim response
    /// (default 512).
    pub max_async_requests: Option<u32>,
    /// Client addresses or networks served (default all), e.g.
    /// ["198.18.0.0/15", "127.0.0.1"].
    #[serde(default)]
    pub hosts_allow: Vec<String>,
    /// Client addresses or networks refused (default none).
    #[serde(default)]
    pub hosts_deny: Vec<String>,
    /// The lowest SMB dialect accepted: "2.0.2" (default), "2.1", "3.0",
    /// "3.0.2" or "3.1.1" (Samba's names, e.g. "SMB3_00", also).
    pub min_protocol: Option<String>,
    /// Failed logons per client address per minute before its logons are
    /// refused for the rest of it (default 30; 0: no limit).
    pub logon_failures_per_minute: Option<u32>,
    /// Model string shown to macOS clients, which pick the server's Finder
    /// icon by it (default "MacSamba").
    pub macos_model: Option<String>,
    /// Interfaces reported to multichannel clients; none: auto-detect.
    #[serde(default, rename = "interface")]
    pub interfaces: Vec<InterfaceEntry>,
    #[serde(default, rename = "share")]
    pub shares: Vec<ShareEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareEntry {
    pub name: String,
    pub path: PathBuf,
    /// Refuse unencrypted access to this share (default false).
    #[serde(default)]
    pub encrypt: bool,
    /// Large aligned writes bypass the page cache (default true).
    pub direct_writes: Option<bool>,
    /// Byte-range locks are kernel locks too (default true, as Samba).
    pub posix_locking: Option<bool>,
    /// Opens respect and take Netatalk's open and deny-mode locks
    /// (default false).
    #[serde(default)]
    pub netatalk_locking: bool,
    /// Named streams can be opened (default true).
    pub named_streams: Option<bool>,
    /// Listings leave out what the user may not read (default false).
    #[serde(default)]
    pub access_based_enumeration: bool,
    /// Report Unix dot files as hidden (default true, as Samba).
    pub hide_dot_files: Option<bool>,
    /// Name patterns reported as hidden (default none).
    #[serde(default)]
    pub hide_files: Vec<String>,
    /// Name patterns neither listed nor opened (default none).
    #[serde(default)]
    pub veto_files: Vec<String>,
    /// A directory holding only vetoed names can be deleted (default false).
    #[serde(default)]
    pub delete_veto_files: bool,
    /// Shown in share lists (default none).
    #[serde(default)]
    pub comment: String,
    /// Listed in share lists (default true).
    pub browseable: Option<bool>,
    /// Unix permission mask of new files, e.g. 0o644 (default: the umask).
    pub create_mask: Option<u32>,
    /// Unix permission mask of new directories, e.g. 0o755.
    pub directory_mask: Option<u32>,
    /// Canonicalise DACL inheritance bits as Windows does (default true).
    pub canonicalize_acl_flags: Option<bool>,
    /// Nobody may change anything in the share but `write_list` (default false).
    #[serde(default)]
    pub read_only: bool,
    /// Only these users may connect (default: every user).
    #[serde(default)]
    pub valid_users: Vec<String>,
    /// These users may only read, even where the share is writable.
    #[serde(default)]
    pub read_list: Vec<String>,
    /// These users may write, even where the share is read-only.
    #[serde(default)]
    pub write_list: Vec<String>,
    /// Client addresses or networks that may use the share (default all).
    #[serde(default)]
    pub hosts_allow: Vec<String>,
    /// Client addresses or networks that may not (default none).
    #[serde(default)]
    pub hosts_deny: Vec<String>,
    /// Guest and anonymous sessions may connect (default false).
    #[serde(default)]
    pub guest_ok: bool,
    /// The directory of the share's snapshots, served as previous
    /// versions: relative to the share's path, or absolute (default none).
    pub snapshot_dir: Option<PathBuf>,
    /// How snapshot directories are named (default "@GMT-%Y.%m.%d-%H.%M.%S").
    pub snapshot_format: Option<String>,
    /// Answer CHANGE_NOTIFY (default true); false: NOT_IMPLEMENTED.
    pub change_notify: Option<bool>,
    /// Report changes made on the host by other processes to change
    /// notifications and directory leases (default true).
    pub notify_host_changes: Option<bool>,
    /// Apple's SMB2 extensions and macOS metadata streams (default true).
    pub macos: Option<bool>,
    /// A Time Machine destination for macOS clients (default false).
    #[serde(default)]
    pub time_machine: bool,
    /// Size reported to macOS clients of a Time Machine share, in bytes or
    /// with a K/M/G/T suffix, e.g. "2T" (default: the file system's).
    pub time_machine_max_size: Option<SizeValue>,
    /// File ids read as 0 by clients that negotiated Apple's extensions
    /// (default false).
    #[serde(default)]
    pub macos_zero_file_id: bool,
    /// Where Finder metadata (AFP_AfpInfo) is kept: "stream" (default) or
    /// "netatalk" (the xattr `user.org.netatalk.Metadata`, Samba's
    /// `fruit:metadata = netatalk`).
    pub macos_metadata: Option<String>,
    /// Where resource forks are kept: "stream" (default) or "file" (an
    /// AppleDouble `._NAME` sidecar, Samba's `fruit:resource = file`).
    pub macos_resource: Option<String>,
    /// With sidecars, hide and refuse `._*` names (default true).
    pub macos_veto_appledouble: Option<bool>,
    /// With sidecars, drop macOS's blank resource forks when converting
    /// its sidecars (default false).
    #[serde(default)]
    pub macos_wipe_blank_resource_fork: bool,
    /// With sidecars, delete the sidecars conversion left empty (default
    /// false).
    #[serde(default)]
    pub macos_delete_empty_appledouble: bool,
}

/// A size in the config: a number of bytes, or a string with a binary
/// suffix ("32K", "500G", "2T").
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    /// Bytes, or None for text that is not a number with an optional
    /// K, M, G, T or P suffix (powers of 1024, as Samba reads sizes).
    pub fn bytes(&self) -> Option<u64> {
        match self {
            SizeValue::Bytes(n) => Some(*n),
            SizeValue::Text(t) => {
                let t = t.trim();
                let (digits, shift) = match t.chars().last()?.to_ascii_uppercase() {
                    'K' => (&t[..t.len() - 1], 10),
                    'M' => (&t[..t.len() - 1], 20),
                    'G' => (&t[..t.len() - 1], 30),
                    'T' => (&t[..t.len() - 1], 40),
                    'P' => (&t[..t.len() - 1], 50),
                    _ => (t, 0),
                };
                digits
                    .trim()
                    .parse::<u64>()
                    .ok()?
                    .checked_mul(1u64 << shift)
            }
        }
    }
}

impl ShareEntry {
    /// A share with every option at its default.
    pub fn new(name: &str, path: PathBuf) -> ShareEntry {
        ShareEntry {
            name: name.to_string(),
            path,
            encrypt: false,
            direct_writes: None,
            posix_locking: None,
            netatalk_locking: false,
            named_streams: None,
            access_based_enumeration: false,
            hide_dot_files: None,
            hide_files: Vec::new(),
            veto_files: Vec::new(),
            delete_veto_files: false,
            comment: String::new(),
            browseable: None,
            create_mask: None,
            directory_mask: None,
            canonicalize_acl_flags: None,
            read_only: false,
            valid_users: Vec::new(),
            read_list: Vec::new(),
            write_list: Vec::new(),
            hosts_allow: Vec::new(),
            hosts_deny: Vec::new(),
            guest_ok: false,
            snapshot_dir: None,
            snapshot_format: None,
            change_notify: None,
            notify_host_changes: None,
            macos: None,
            time_machine: false,
            time_machine_max_size: None,
            macos_zero_file_id: false,
            macos_resource: None,
            macos_veto_appledouble: None,
            macos_wipe_blank_resource_fork: false,
            macos_metadata: None,
            macos_delete_empty_appledouble: false,
        }
    }
}

/// `[[interface]]`: one address reported by FSCTL_QUERY_NETWORK_INTERFACE_INFO.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceEntry {
    pub address: String,
    pub if_index: u32,
    /// Link speed in Mbit/s (default 10000).
    pub speed_mbps: Option<u64>,
    /// RSS-capable (default true).
    pub rss: Option<bool>,
}

/// Validate an `[[interface]]` table into the server's form.
pub fn parse_interface(e: &InterfaceEntry) -> Result<braid_server::InterfaceConfig, String> {
    let address = e.address.parse::<std::net::IpAddr>().map_err(|_| {
        format!(
            "interface address = '{}': not an IP address such as 127.0.0.2 or fd00::1",
            e.address
        )
    })?;
    if e.if_index == 0 {
        return Err(format!(
            "interface {}: if_index = 0; use a non-zero interface index",
            e.address
        ));
    }
    let speed_mbps = e.speed_mbps.unwrap_or(10_000);
    if speed_mbps == 0 {
        return Err(format!(
            "interface {}: speed_mbps = 0; clients ignore interfaces without a speed",
            e.address
        ));
    }
    Ok(braid_server::InterfaceConfig {
        address,
        if_index: e.if_index,
        speed_mbps,
        rss: e.rss.unwrap_or(true),
    })
}

pub fn load(path: &Path) -> Result<FileConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("config {}: cannot read: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("config {}: {e}", path.display()))
}

pub fn parse(text: &str) -> Result<FileConfig, String> {
    toml::from_str::<FileConfig>(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let msg = e.message().replace('\n', " ");
        match line {
            Some(l) => format!("line {l}: {msg}"),
            None => msg,
        }
    })
}

pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>().map_err(|_| {
        format!("listen: '{s}' is not an address:port such as 127.0.0.1:4445 or [::1]:445")
    })
}

/// `admin_listen`: an address, or "off"/"" for no admin API.
pub fn parse_admin_listen(s: &str) -> Result<Option<SocketAddr>, String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    t.parse::<SocketAddr>().map(Some).map_err(|_| {
        format!("admin_listen: '{s}' is not an address:port such as 127.0.0.1:9445, or \"off\"")
    })
}

/// `NAME=PATH` from `--share`.
pub fn parse_share_flag(s: &str) -> Result<ShareEntry, String> {
    match s.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok(ShareEntry::new(n, PathBuf::from(p))),
        _ => Err(format!(
            "--share '{s}': expected NAME=PATH, e.g. --share data=/srv/data"
        )),
    }
}

/// `NAME:PASSWORD` from `--user`.
pub fn parse_user_flag(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((n, p)) if !n.is_empty() => Ok((n.to_string(), p.to_string())),
        _ => Err("--user: expected NAME:PASSWORD, e.g. --user alice:secret".to_string()),
    }
}

/// `hosts_allow` and `hosts_deny`; `prefix` names where they were given.
pub fn parse_hosts(
    prefix: &str,
    allow: &[String],
    deny: &[String],
) -> Result<braid_server::host_access::HostRules, String> {
    let parse = |key: &str, list: &[String]| {
        list.iter()
            .map(|s| {
                braid_server::host_access::parse_net(s).map_err(|e| format!("{prefix}{key}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(braid_server::host_access::HostRules {
        allow: parse("hosts_allow", allow)?,
        deny: parse("hosts_deny", deny)?,
    })
}

/// `min_protocol`: a dialect, as SMB writes it or as Samba names it.
pub fn parse_min_protocol(s: &str) -> Result<u16, String> {
    use braid_smb_proto::messages::negotiate::dialect;
    Ok(match s.trim().to_ascii_uppercase().as_str() {
        "2.0.2" | "2.02" | "SMB2" | "SMB2_02" => dialect::SMB202,
        "2.1" | "2.10" | "SMB2_10" => dialect::SMB210,
        "3.0" | "3.00" | "SMB3" | "SMB3_00" => dialect::SMB300,
        "3.0.2" | "3.02" | "SMB3_02" => dialect::SMB302,
        "3.1.1" | "3.11" | "SMB3_11" => dialect::SMB311,
        _ => {
            return Err(format!(
                "min_protocol = '{s}': use \"2.0.2\", \"2.1\", \"3.0\", \"3.0.2\" or \"3.1.1\""
            ))
        }
    })
}

pub fn parse_cipher(s: &str) -> Result<braid_smb_proto::crypto::Cipher, String> {
    use braid_smb_proto::crypto::Cipher;
    Ok(match s.to_ascii_lowercase().as_str() {
        "aes-128-gcm" => Cipher::Aes128Gcm,
        "aes-128-ccm" => Cipher::Aes128Ccm,
        "aes-256-gcm" => Cipher::Aes256Gcm,
        "aes-256-ccm" => Cipher::Aes256Ccm,
        _ => {
            return Err(format!(
                "ciphers: '{s}' is not a cipher; use aes-128-gcm, aes-256-gcm, aes-128-ccm or aes-256-ccm"
            ))
        }
    })
}

pub fn validate_share_name(name: &str) -> Result<(), String> {
    let bad = name.is_empty()
        || name.len() > 80
        || name.eq_ignore_ascii_case("IPC$")
        || name
            .chars()
            .any(|c| c.is_control() || "\\/:*?\"<>|[]+=;,".contains(c));
    if bad {
        return Err(format!(
            "share name '{name}' is invalid: use letters, digits, '-', '_', '.', '$' (at most 80 characters, not IPC$)"
        ));
    }
    Ok(())
}

/// The share's macOS options, checked.
pub fn mac_config(s: &ShareEntry) -> Result<braid_server::config::MacShareOptions, String> {
    let time_machine_max_size = match &s.time_machine_max_size {
        None => None,
        Some(v) => {
            let Some(bytes) = v.bytes().filter(|b| *b > 0) else {
                return Err(format!(
                    "share '{}': time_machine_max_size = {v:?}: give a size in bytes or with a \
                     K, M, G or T suffix, e.g. \"2T\"",
                    s.name
                ));
            };
            if !s.time_machine {
                return Err(format!(
                    "share '{}': time_machine_max_size is set but time_machine is not; \
                     add time_machine = true",
                    s.name
                ));
            }
            Some(bytes)
        }
    };
    let enabled = s.macos.unwrap_or(true);
    if !enabled
        && (s.time_machine
            || s.macos_zero_file_id
            || s.macos_resource.is_some()
            || s.macos_metadata.is_some())
    {
        return Err(format!(
            "share '{}': time_machine, macos_zero_file_id, macos_metadata and macos_resource \
             need macos; remove macos = false or those keys",
            s.name
        ));
    }
    let in_sidecar = match s.macos_resource.as_deref() {
        None | Some("stream") => false,
        Some("file") => true,
        Some(other) => {
            return Err(format!(
                "share '{}': macos_resource = {other:?}: use \"stream\" (a named stream, the \
                 default) or \"file\" (AppleDouble ._ files)",
                s.name
            ))
        }
    };
    let netatalk_metadata = match s.macos_metadata.as_deref() {
        None | Some("stream") => false,
        Some("netatalk") => true,
        Some(other) => {
            return Err(format!(
                "share '{}': macos_metadata = {other:?}: use \"stream\" (a named stream, the \
                 default) or \"netatalk\" (Netatalk's metadata xattr, as Samba keeps it)",
                s.name
            ))
        }
    };
    let sidecar_keys = s.macos_veto_appledouble.is_some()
        || s.macos_wipe_blank_resource_fork
        || s.macos_delete_empty_appledouble;
    if sidecar_keys && !in_sidecar {
        return Err(format!(
            "share '{}': macos_veto_appledouble, macos_wipe_blank_resource_fork and \
             macos_delete_empty_appledouble apply to AppleDouble files; add \
             macos_resource = \"file\" or remove them",
            s.name
        ));
    }
    Ok(braid_server::config::MacShareOptions {
        enabled,
        time_machine: s.time_machine,
        time_machine_max_size,
        zero_file_id: s.macos_zero_file_id,
        apple_double: braid_fs::AppleDoubleOptions {
            resource_fork_in_sidecar: in_sidecar,
            wipe_blank_resource_fork: s.macos_wipe_blank_resource_fork,
            delete_empty_sidecars: s.macos_delete_empty_appledouble,
        },
        veto_appledouble: s.macos_veto_appledouble.unwrap_or(true),
        netatalk_metadata,
    })
}

/// The share's previous versions (`snapshot_dir`, `snapshot_format`), or a
/// configuration error naming the key and the fix.
pub fn snapshot_config(s: &ShareEntry) -> Result<Option<braid_fs::SnapshotConfig>, String> {
    let Some(dir) = &s.snapshot_dir else {
        if s.snapshot_format.is_some() {
            return Err(format!(
                "share '{}': snapshot_format is set but snapshot_dir is not; \
                 give the directory holding the snapshots, e.g. snapshot_dir = \".snapshots\"",
                s.name
            ));
        }
        return Ok(None);
    };
    if dir
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "share '{}': snapshot_dir = {}: \"..\" is not allowed; give a path inside the share \
             (e.g. \".snapshots\") or an absolute path",
            s.name,
            dir.display()
        ));
    }
    let config = braid_fs::SnapshotConfig {
        dir: dir.clone(),
        format: s
            .snapshot_format
            .clone()
            .unwrap_or_else(|| braid_fs::snapshot::DEFAULT_FORMAT.to_string()),
    };
    config.validate().map_err(|why| {
        format!(
            "share '{}': snapshot_format = \"{}\": {why}; e.g. \"{}\"",
            s.name,
            config.format,
            braid_fs::snapshot::DEFAULT_FORMAT
        )
    })?;
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        let t = |x: &str| SizeValue::Text(x.into()).bytes();
        assert_eq!(t("32K"), Some(32 << 10));
        assert_eq!(t("2t"), Some(2 << 40));
        assert_eq!(t(" 500 G "), Some(500 << 30));
        assert_eq!(t("4096"), Some(4096));
        assert_eq!(SizeValue::Bytes(7).bytes(), Some(7));
        assert_eq!(t("2X"), None);
        assert_eq!(t("K"), None);
        assert_eq!(t(""), None);
        assert_eq!(t("99999999999T"), None);
    }

    #[test]
    fn time_machine_size_needs_time_machine() {
        let mut s = ShareEntry::new("tm", PathBuf::from("/tmp"));
        s.time_machine_max_size = Some(SizeValue::Text("1T".into()));
        let err = mac_config(&s).unwrap_err();
        assert!(err.contains("time_machine = true"), "{err}");
        s.time_machine = true;
        assert_eq!(mac_config(&s).unwrap().time_machine_max_size, Some(1 << 40));
        s.time_machine_max_size = Some(SizeValue::Text("lots".into()));
        assert!(mac_config(&s)
            .unwrap_err()
            .contains("time_machine_max_size"));
    }

    #[test]
    fn macos_resource_file_and_its_options() {
        let mut s = ShareEntry::new("mac", PathBuf::from("/tmp"));
        s.macos_delete_empty_appledouble = true;
        let err = mac_config(&s).unwrap_err();
        assert!(err.contains("macos_resource = \"file\""), "{err}");
        s.macos_resource = Some("file".into());
        let m = mac_config(&s).unwrap();
        assert!(m.apple_double.resource_fork_in_sidecar);
        assert!(m.apple_double.delete_empty_sidecars);
        assert!(m.veto_appledouble);
        s.macos_resource = Some("xattr".into());
        let err = mac_config(&s).unwrap_err();
        assert!(err.contains("macos_resource = \"xattr\""), "{err}");
        s.macos_resource = Some("file".into());
        s.macos = Some(false);
        assert!(mac_config(&s).unwrap_err().contains("need macos"));
    }

    #[test]
    fn macos_metadata_stream_or_netatalk() {
        let mut s = ShareEntry::new("mac", PathBuf::from("/tmp"));
        assert!(!mac_config(&s).unwrap().netatalk_metadata);
        s.macos_metadata = Some("netatalk".into());
        assert!(mac_config(&s).unwrap().netatalk_metadata);
        s.macos_metadata = Some("xattr".into());
        let err = mac_config(&s).unwrap_err();
        assert!(err.contains("macos_metadata = \"xattr\""), "{err}");
        s.macos_metadata = Some("netatalk".into());
        s.macos = Some(false);
        assert!(mac_config(&s).unwrap_err().contains("need macos"));
    }

    #[test]
    fn min_protocol_names() {
        use braid_smb_proto::messages::negotiate::dialect;
        for (s, d) in [
            ("2.0.2", dialect::SMB202),
            ("SMB2_10", dialect::SMB210),
            ("smb3", dialect::SMB300),
            ("3.0.2", dialect::SMB302),
            ("3.1.1", dialect::SMB311),
        ] {
            assert_eq!(parse_min_protocol(s), Ok(d), "{s}");
        }
        let e = parse_min_protocol("NT1").unwrap_err();
        assert!(e.starts_with("min_protocol = 'NT1': use"), "{e}");
    }

    #[test]
    fn unknown_key_names_the_key_and_line() {
        let e = parse("listen = [\"127.0.0.1:4445\"]\nbogus = 1\n").unwrap_err();
        assert!(e.contains("bogus"), "{e}");
        assert!(e.starts_with("line 2"), "{e}");
    }

    #[test]
    fn snapshot_settings() {
        let share = |extra: &str| {
            let c = parse(&format!(
                "[[share]]\nname = \"d\"\npath = \"/srv\"\n{extra}"
            ))
            .unwrap();
            snapshot_config(&c.shares[0])
        };
        assert_eq!(share("").unwrap(), None);
        let c = share("snapshot_dir = \".snapshots\"\n").unwrap().unwrap();
        assert_eq!(c.format, braid_fs::snapshot::DEFAULT_FORMAT);
        let c =
            share("snapshot_dir = \"/tank/.zfs/snapshot\"\nsnapshot_format = \"auto-%Y-%m-%d\"\n");
        assert_eq!(c.unwrap().unwrap().format, "auto-%Y-%m-%d");
        for (bad, names) in [
            ("snapshot_format = \"%Y\"\n", "snapshot_dir"),
            ("snapshot_dir = \"../x\"\n", "\"..\""),
            ("snapshot_dir = \"s\"\nsnapshot_format = \"%d.%m\"\n", "%Y"),
        ] {
            let e = share(bad).unwrap_err();
            assert!(e.contains(names) && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn shares_parse() {
        let c = parse("[[share]]\nname = \"data\"\npath = \"/srv\"\n").unwrap();
        assert_eq!(c.shares.len(), 1);
        assert_eq!(c.shares[0].name, "data");
        assert_eq!(c.shares[0].macos, None);
        let c = parse("[[share]]\nname = \"d\"\npath = \"/srv\"\nmacos = false\n").unwrap();
        assert_eq!(c.shares[0].macos, Some(false));
    }

    #[test]
    fn interfaces_parse() {
        let c = parse(
            "multichannel = true\nmax_channels = 4\n[[interface]]\naddress = \"127.0.0.2\"\nif_index = 2\nspeed_mbps = 1000\nrss = false\n",
        )
        .unwrap();
        assert_eq!(c.max_channels, Some(4));
        let i = parse_interface(&c.interfaces[0]).unwrap();
        assert_eq!(i.if_index, 2);
        assert_eq!(i.speed_mbps, 1000);
        assert!(!i.rss);
        assert!(parse("[[interface]]\naddress = \"x\"\nif_index = 1\n")
            .map(|c| parse_interface(&c.interfaces[0]).is_err())
            .unwrap());
    }

    #[test]
    fn flags_parse() {
        assert!(parse_share_flag("data=/srv").is_ok());
        assert!(parse_share_flag("data").is_err());
        assert_eq!(
            parse_user_flag("a:b:c").unwrap(),
            ("a".into(), "b:c".into())
        );
        assert!(validate_share_name("data").is_ok());
        assert!(validate_share_name("a/b").is_err());
        assert!(parse_listen("127.0.0.1:4445").is_ok());
        assert!(parse_listen("localhost").is_err());
        assert_eq!(
            parse_admin_listen("127.0.0.1:9445").unwrap(),
            Some("127.0.0.1:9445".parse().unwrap())
        );
        assert_eq!(parse_admin_listen("off").unwrap(), None);
        assert_eq!(parse_admin_listen("").unwrap(), None);
        assert!(parse_admin_listen("9445")
            .unwrap_err()
            .contains("admin_listen"));
        let c = parse("admin_listen = \"off\"\n").unwrap();
        assert_eq!(c.admin_listen.as_deref(), Some("off"));
    }
}
