//! The NFS export options of one share, as an admin knows them from
//! `/etc/exports` (exports(5)) and nfs-ganesha's `EXPORT` block: which
//! clients may mount it and whether they may write, how callers' ids are
//! squashed, whether a reserved source port is required, and which
//! security flavours are accepted. The binary's config (`braid.toml`,
//! docs/CONFIG.md, "NFS exports") fills them in; the NFS server asks them.

use std::net::SocketAddr;

/// Who is mapped to the anonymous ids (`anon_uid`, `anon_gid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Squash {
    /// `no_root_squash`: every id is taken as the client sends it.
    None,
    /// `root_squash` (the default, as in exports(5) and nfs-ganesha):
    /// uid 0 and gid 0 become the anonymous ids.
    #[default]
    Root,
    /// `all_squash`: every caller is the anonymous user.
    All,
}

/// One entry of `nfs_clients`: the clients of a network (or one address)
/// and whether they may only read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRule {
    pub net: ipnet::IpNet,
    pub read_only: bool,
}

/// An RPC security flavour (RFC 5531 9, RFC 8881 2.2.1.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecFlavor {
    /// AUTH_NONE (0): no credentials; the caller is the anonymous user.
    None,
    /// AUTH_SYS (1): uid, gid and groups as the client asserts them.
    Sys,
    // krb5, krb5i, krb5p (RPCSEC_GSS) later.
}

impl SecFlavor {
    /// The name `nfs_sec` uses (exports(5)'s `sec=`).
    pub fn name(self) -> &'static str {
        match self {
            SecFlavor::None => "none",
            SecFlavor::Sys => "sys",
        }
    }
}

/// The anonymous ids exports(5) and nfs-ganesha default to (`nobody`,
/// `nogroup` on Debian).
pub const ANON_ID: u32 = 65534;

/// What one share's NFS export allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfsExportOptions {
    /// Empty: every client the server admits (hosts_allow/hosts_deny),
    /// read-write. Otherwise the first rule whose network holds the client
    /// decides; no match: refused.
    pub clients: Vec<ClientRule>,
    /// The whole export is read-only, whatever the client rules say.
    pub read_only: bool,
    pub squash: Squash,
    pub anon_uid: u32,
    pub anon_gid: u32,
    /// Clients must use a source port below 1024 (exports(5)'s `secure`;
    /// off by default, as in nfs-ganesha, since unprivileged and NATed
    /// clients cannot).
    pub secure_port: bool,
    /// Flavours accepted, in the order SECINFO reports them; never empty.
    pub sec: Vec<SecFlavor>,
}

impl Default for NfsExportOptions {
    fn default() -> Self {
        NfsExportOptions {
            clients: Vec::new(),
            read_only: false,
            squash: Squash::Root,
            anon_uid: ANON_ID,
            anon_gid: ANON_ID,
            secure_port: false,
            sec: vec![SecFlavor::Sys],
        }
    }
}

/// What a client may do with an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportAccess {
    Denied,
    ReadOnly,
    ReadWrite,
}

/// The ids an NFS request acts as, after squashing.
pub use braid_fs::posix::Credentials;

impl NfsExportOptions {
    /// What the client at `peer` may do: nothing from a port of 1024 or
    /// above when `secure_port` is set; otherwise what the first client
    /// rule holding its address says (every admitted client, read-write,
    /// without rules), made read-only by `read_only`.
    pub fn access_for(&self, peer: SocketAddr) -> ExportAccess {
        if self.secure_port && peer.port() >= 1024 {
            return ExportAccess::Denied;
        }
        // An IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d.
        let addr = peer.ip().to_canonical();
        let rule_read_only = if self.clients.is_empty() {
            false
        } else {
            match self.clients.iter().find(|r| r.net.contains(&addr)) {
                Some(rule) => rule.read_only,
                None => return ExportAccess::Denied,
            }
        };
        if self.read_only || rule_read_only {
            ExportAccess::ReadOnly
        } else {
            ExportAccess::ReadWrite
        }
    }

    /// The ids a caller acts as (RFC 8881 2.2.1.1.1.1, exports(5) "User ID
    /// Mapping"): `root_squash` maps uid 0 to `anon_uid`, gid 0 to
    /// `anon_gid` and gid 0 among the groups to `anon_gid`; `all_squash`
    /// maps every caller to `anon_uid`/`anon_gid` with no groups; AUTH_NONE
    /// callers (`None` ids) are the anonymous user whatever the squash.
    pub fn map_credentials(
        &self,
        uid: Option<u32>,
        gid: Option<u32>,
        groups: &[u32],
    ) -> Credentials {
        let anonymous = Credentials {
            uid: self.anon_uid,
            gid: self.anon_gid,
            groups: Vec::new(),
        };
        let Some(uid) = uid else {
            return anonymous;
        };
        let gid = gid.unwrap_or(self.anon_gid);
        match self.squash {
            Squash::All => anonymous,
            Squash::None => Credentials {
                uid,
                gid,
                groups: groups.to_vec(),
            },
            Squash::Root => {
                let g = |id: u32| if id == 0 { self.anon_gid } else { id };
                Credentials {
                    uid: if uid == 0 { self.anon_uid } else { uid },
                    gid: g(gid),
                    groups: groups.iter().copied().map(g).collect(),
                }
            }
        }
    }

    /// Whether a request with flavour `f` is accepted (else
    /// NFS4ERR_WRONGSEC / AUTH_TOOWEAK).
    pub fn allows_flavor(&self, f: SecFlavor) -> bool {
        self.sec.contains(&f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> ipnet::IpNet {
        s.parse().unwrap()
    }

    fn peer(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_are_root_squash_sys_and_everyone_read_write() {
        let o = NfsExportOptions::default();
        assert_eq!(o.squash, Squash::Root);
        assert_eq!((o.anon_uid, o.anon_gid), (65534, 65534));
        assert_eq!(o.sec, [SecFlavor::Sys]);
        assert!(!o.secure_port && !o.read_only && o.clients.is_empty());
        assert_eq!(
            o.access_for(peer("203.0.113.9:40000")),
            ExportAccess::ReadWrite
        );
        assert!(o.allows_flavor(SecFlavor::Sys));
        assert!(!o.allows_flavor(SecFlavor::None));
    }

    #[test]
    fn the_first_matching_client_rule_decides() {
        let o = NfsExportOptions {
            clients: vec![
                ClientRule {
                    net: net("192.168.1.5/32"),
                    read_only: true,
                },
                ClientRule {
                    net: net("192.168.0.0/16"),
                    read_only: false,
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            o.access_for(peer("192.168.1.5:900")),
            ExportAccess::ReadOnly
        );
        assert_eq!(
            o.access_for(peer("192.168.7.1:900")),
            ExportAccess::ReadWrite
        );
        assert_eq!(o.access_for(peer("10.0.0.1:900")), ExportAccess::Denied);
        assert_eq!(
            o.access_for(peer("[::ffff:192.168.7.1]:900")),
            ExportAccess::ReadWrite,
            "an IPv4 client of a dual-stack listener"
        );
        let ro = NfsExportOptions {
            read_only: true,
            ..o.clone()
        };
        assert_eq!(
            ro.access_for(peer("192.168.7.1:900")),
            ExportAccess::ReadOnly
        );
        assert_eq!(ro.access_for(peer("10.0.0.1:900")), ExportAccess::Denied);
    }

    #[test]
    fn secure_port_refuses_unprivileged_source_ports() {
        let o = NfsExportOptions {
            secure_port: true,
            ..Default::default()
        };
        assert_eq!(
            o.access_for(peer("127.0.0.1:1023")),
            ExportAccess::ReadWrite
        );
        assert_eq!(o.access_for(peer("127.0.0.1:1024")), ExportAccess::Denied);
    }

    #[test]
    fn root_squash_maps_root_ids_and_groups() {
        let o = NfsExportOptions::default();
        let c = o.map_credentials(Some(0), Some(0), &[0, 10, 0]);
        assert_eq!(
            c,
            Credentials {
                uid: 65534,
                gid: 65534,
                groups: vec![65534, 10, 65534]
            }
        );
        let c = o.map_credentials(Some(1000), Some(0), &[27]);
        assert_eq!((c.uid, c.gid, c.groups), (1000, 65534, vec![27]));
        let c = o.map_credentials(Some(1000), Some(1000), &[27]);
        assert_eq!((c.uid, c.gid, c.groups), (1000, 1000, vec![27]));
    }

    #[test]
    fn no_root_squash_keeps_root() {
        let o = NfsExportOptions {
            squash: Squash::None,
            ..Default::default()
        };
        let c = o.map_credentials(Some(0), Some(0), &[0]);
        assert_eq!((c.uid, c.gid, c.groups), (0, 0, vec![0]));
    }

    #[test]
    fn all_squash_and_auth_none_are_anonymous() {
        let o = NfsExportOptions {
            squash: Squash::All,
            anon_uid: 1500,
            anon_gid: 1501,
            ..Default::default()
        };
        for (uid, gid) in [(Some(1000), Some(1000)), (Some(0), Some(0))] {
            let c = o.map_credentials(uid, gid, &[4, 27]);
            assert_eq!((c.uid, c.gid, c.groups), (1500, 1501, vec![]));
        }
        for squash in [Squash::None, Squash::Root, Squash::All] {
            let o = NfsExportOptions {
                squash,
                ..o.clone()
            };
            let c = o.map_credentials(None, None, &[]);
            assert_eq!((c.uid, c.gid, c.groups), (1500, 1501, vec![]), "{squash:?}");
        }
    }
}
