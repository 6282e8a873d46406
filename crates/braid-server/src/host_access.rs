//! Which client addresses may connect: Samba's `hosts allow` and `hosts
//! deny`, for the whole server (checked as a connection is accepted) and
//! per share (checked at TREE_CONNECT).

use std::net::IpAddr;

use ipnet::IpNet;

/// Address ranges allowed and denied. Both empty: everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRules {
    pub allow: Vec<IpNet>,
    pub deny: Vec<IpNet>,
}

impl HostRules {
    /// Samba's rule (`lib/util/access.c`): with only an allow list, the
    /// address must be on it; with only a deny list, it must not be; with
    /// both, the allow list wins, then the deny list, and an address on
    /// neither is allowed.
    pub fn admits(&self, addr: IpAddr) -> bool {
        // An IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d.
        let addr = addr.to_canonical();
        let on = |list: &[IpNet]| list.iter().any(|net| net.contains(&addr));
        match (self.allow.is_empty(), self.deny.is_empty()) {
            (true, true) => true,
            (false, true) => on(&self.allow),
            (true, false) => !on(&self.deny),
            (false, false) => on(&self.allow) || !on(&self.deny),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

/// One `hosts_allow` / `hosts_deny` entry: a network ("198.18.0.0/15",
/// "fd00::/8") or one address ("127.0.0.1", "::1").
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    let t = s.trim();
    if let Ok(net) = t.parse::<IpNet>() {
        // 198.18.0.7/15 means its network, as Samba reads it.
        return Ok(net.trunc());
    }
    t.parse::<IpAddr>().map(IpNet::from).map_err(|_| {
        format!("'{s}' is not an address or network such as 192.0.2.7, 198.18.0.0/15 or fd00::/8")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> HostRules {
        HostRules {
            allow: allow.iter().map(|s| parse_net(s).unwrap()).collect(),
            deny: deny.iter().map(|s| parse_net(s).unwrap()).collect(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn no_rules_admit_everyone() {
        assert!(HostRules::default().admits(ip("203.0.113.9")));
    }

    #[test]
    fn an_allow_list_alone_admits_only_its_members() {
        let r = rules(&["198.18.0.0/15", "::1"], &[]);
        assert!(r.admits(ip("198.19.255.1")));
        assert!(r.admits(ip("::1")));
        assert!(!r.admits(ip("198.20.0.1")));
        assert!(
            r.admits(ip("::ffff:198.18.0.9")),
            "an IPv4 client on a dual-stack socket"
        );
    }

    #[test]
    fn a_deny_list_alone_refuses_only_its_members() {
        let r = rules(&[], &["203.0.113.0/24"]);
        assert!(!r.admits(ip("203.0.113.200")));
        assert!(r.admits(ip("203.0.114.1")));
    }

    #[test]
    fn with_both_allow_wins_and_the_rest_is_admitted() {
        // Samba's own example: deny everyone, allow one network.
        let r = rules(&["198.18.4.0/24"], &["0.0.0.0/0"]);
        assert!(r.admits(ip("198.18.4.77")));
        assert!(!r.admits(ip("198.18.5.1")));
        let r = rules(&["127.0.0.1"], &["127.0.0.0/8"]);
        assert!(r.admits(ip("127.0.0.1")));
        assert!(!r.admits(ip("127.0.0.2")));
        let r = rules(&["198.18.0.0/16"], &["203.0.113.0/24"]);
        assert!(r.admits(ip("192.0.2.1")), "on neither list");
    }

    #[test]
    fn entries_parse_as_samba_reads_them() {
        assert_eq!(
            parse_net("198.18.0.7/15").unwrap().to_string(),
            "198.18.0.0/15"
        );
        assert_eq!(
            parse_net(" 127.0.0.1 ").unwrap().to_string(),
            "127.0.0.1/32"
        );
        assert_eq!(parse_net("fd00::/8").unwrap().to_string(), "fd00::/8");
        let e = parse_net("EXCEPT").unwrap_err();
        assert!(e.contains("'EXCEPT' is not an address or network"), "{e}");
    }
}
