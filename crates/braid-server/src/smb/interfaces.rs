//! The server's network interfaces as FSCTL_QUERY_NETWORK_INTERFACE_INFO
//! reports them (MS-SMB2 3.3.5.15.11): from the configuration, or detected
//! with getifaddrs(3) when the configuration lists none.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use braid_smb_proto::messages::ioctl::NetworkInterfaceInfo;

use crate::config::{InterfaceConfig, ServerConfig};

/// MS-SMB2 2.2.32.5 Capability: RSS_CAPABLE.
pub const RSS_CAPABLE: u32 = 0x0000_0001;

/// Link speed reported when the kernel does not know one (loopback,
/// virtual links): 10 Gbit/s, so that clients do not ignore the interface.
const DEFAULT_SPEED_MBPS: u64 = 10_000;

/// The interfaces to report: the configured list, or the detected one.
pub fn list(config: &ServerConfig) -> Vec<NetworkInterfaceInfo> {
    let ifs = if config.interfaces.is_empty() {
        detect(&config.listen)
    } else {
        config.interfaces.clone()
    };
    ifs.iter()
        .map(|i| NetworkInterfaceInfo {
            if_index: i.if_index,
            capability: if i.rss { RSS_CAPABLE } else { 0 },
            // LinkSpeed is in bits per second.
            link_speed: i.speed_mbps.saturating_mul(1_000_000),
            address: i.address,
        })
        .collect()
}

/// Interfaces reachable through the listening addresses: every address of
/// the machine when listening on a wildcard, else the listening addresses
/// themselves. Loopback addresses are included only when the server listens
/// on loopback (or on a wildcard and nothing else is up).
pub fn detect(listen: &[SocketAddr]) -> Vec<InterfaceConfig> {
    let system = system_interfaces();
    let mut out: Vec<InterfaceConfig> = Vec::new();
    fn push(out: &mut Vec<InterfaceConfig>, i: InterfaceConfig) {
        if !out.iter().any(|o| o.address == i.address) {
            out.push(i);
        }
    }
    for l in listen {
        let ip = l.ip();
        if ip.is_unspecified() {
            for s in &system {
                let same_family = s.address.is_ipv4() == ip.is_ipv4();
                // [::] usually accepts IPv4 too (dual stack).
                if (same_family || ip.is_ipv6()) && !s.address.is_loopback() {
                    push(&mut out, s.clone());
                }
            }
        } else if let Some(s) = system.iter().find(|s| s.address == ip) {
            push(&mut out, s.clone());
        } else if ip.is_loopback() {
            // 127.0.0.2 and friends route through lo without being assigned.
            let lo = system
                .iter()
                .find(|s| s.address.is_loopback())
                .map(|s| s.if_index)
                .unwrap_or(1);
            push(
                &mut out,
                InterfaceConfig {
                    address: ip,
                    if_index: lo,
                    speed_mbps: DEFAULT_SPEED_MBPS,
                    rss: true,
                },
            );
        }
    }
    if out.is_empty() {
        // Wildcard with only loopback up (containers, CI).
        for s in system {
            push(&mut out, s);
        }
    }
    out
}

/// Every address of every interface that is up (getifaddrs).
pub fn system_interfaces() -> Vec<InterfaceConfig> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free with freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_flags & libc::IFF_UP as u32 == 0 {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr whose
        // family says which sockaddr_* it is.
        let address = unsafe {
            match (*ifa.ifa_addr).sa_family as i32 {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    let a = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                    // Link-local addresses need a scope id clients cannot use.
                    if a.segments()[0] & 0xffc0 == 0xfe80 {
                        continue;
                    }
                    IpAddr::V6(a)
                }
                _ => continue,
            }
        };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        // SAFETY: if_nametoindex reads the NUL-terminated name.
        let if_index = unsafe { libc::if_nametoindex(ifa.ifa_name) };
        let name = name.to_string_lossy().into_owned();
        let speed_mbps = std::fs::read_to_string(format!("/sys/class/net/{name}/speed"))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|&s| s > 0)
            .map(|s| s as u64)
            .unwrap_or(DEFAULT_SPEED_MBPS);
        out.push(InterfaceConfig {
            address,
            if_index,
            speed_mbps,
            rss: true,
        });
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_listener_reports_loopback() {
        let ifs = detect(&["127.0.0.1:4445".parse().unwrap()]);
        assert_eq!(ifs.len(), 1);
        assert_eq!(ifs[0].address, "127.0.0.1".parse::<IpAddr>().unwrap());
        assert!(ifs[0].speed_mbps > 0);
    }

    #[test]
    fn unassigned_loopback_alias_is_reported() {
        let ifs = detect(&["127.0.0.2:4445".parse().unwrap()]);
        assert_eq!(ifs[0].address, "127.0.0.2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn configured_list_wins() {
        let cfg = ServerConfig {
            interfaces: vec![InterfaceConfig {
                address: "10.0.0.1".parse().unwrap(),
                if_index: 7,
                speed_mbps: 1000,
                rss: false,
            }],
            ..Default::default()
        };
        let l = list(&cfg);
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].if_index, 7);
        assert_eq!(l[0].link_speed, 1_000_000_000);
        assert_eq!(l[0].capability, 0);
    }
}
