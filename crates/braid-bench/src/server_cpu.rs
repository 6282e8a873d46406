//! The CPU a server under test spends during the measured window, read
//! from `/proc` for a process and its descendants (smbd forks one child per
//! connection; Braid and nfs-ganesha are one process), so a report can say
//! what a GiB or an operation cost the server and not only how fast it went.

use std::collections::HashMap;

/// CPU seconds (user + system) of `pid` and its descendants: each live
/// process's utime + stime plus cutime + cstime (children that exited and
/// were reaped). `None` when `pid` is not there.
///
/// A child reaped while the tree is read has its CPU moved into its
/// parent's cutime: read before its parent it would count twice, skipped it
/// would not count at all. So parents are read before their children and,
/// when one has gone by the time it is read, the whole tree is read again.
pub fn tree_cpu_seconds(pid: u32) -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = if ticks > 0 { ticks as f64 } else { 100.0 };
    for _ in 0..50 {
        let tree = process_tree(pid)?;
        let mut total = 0u64;
        let mut lost = false;
        for p in tree {
            match read_stat(p) {
                Some(st) => total += st.cpu_ticks,
                None if p == pid => return None,
                None => {
                    lost = true;
                    break;
                }
            }
        }
        if !lost {
            return Some(total as f64 / ticks);
        }
    }
    None
}

struct Stat {
    ppid: u32,
    /// utime + stime + cutime + cstime.
    cpu_ticks: u64,
}

/// proc(5): the fields after the command name's closing parenthesis start
/// at field 3 (state); ppid is field 4, utime..cstime are fields 14-17.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let mut cpu_ticks = 0u64;
    for f in fields.get(11..15)? {
        cpu_ticks += f.parse::<u64>().ok()?;
    }
    Some(Stat { ppid, cpu_ticks })
}

fn read_stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `pid` first, then its descendants, each after its parent.
fn process_tree(pid: u32) -> Option<Vec<u32>> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(st) = read_stat(p) {
            children.entry(st.ppid).or_default().push(p);
        }
    }
    let mut tree = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        tree.push(p);
        if let Some(c) = children.get(&p) {
            todo.extend(c);
        }
    }
    Some(tree)
}

/// What the server spent in the measured window.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct ServerCpu {
    pub pid: u32,
    /// CPU seconds (user + system) of the server's process tree.
    pub seconds: f64,
    /// CPU seconds per GiB moved (read + written); 0 when nothing moved.
    pub seconds_per_gib: f64,
    /// CPU microseconds per operation.
    pub us_per_op: f64,
}

impl ServerCpu {
    pub fn new(pid: u32, seconds: f64, bytes: u64, ops: u64) -> Self {
        let gib = bytes as f64 / (1u64 << 30) as f64;
        ServerCpu {
            pid,
            seconds,
            seconds_per_gib: if gib > 0.0 { seconds / gib } else { 0.0 },
            us_per_op: if ops > 0 {
                seconds * 1e6 / ops as f64
            } else {
                0.0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_spaces_and_parentheses_in_the_name() {
        let line = "4242 (smbd: client (x)) S 17 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 50 7 3 20 0 1 0 123 456 789";
        let st = parse_stat(line).unwrap();
        assert_eq!(st.ppid, 17);
        assert_eq!(st.cpu_ticks, 250 + 50 + 7 + 3);
    }

    #[test]
    fn a_truncated_line_is_refused() {
        assert!(parse_stat("1 (x) S 0 1 1").is_none());
        assert!(parse_stat("no parenthesis").is_none());
    }

    #[test]
    fn own_process_is_measured_and_grows_with_work() {
        let me = std::process::id();
        let a = tree_cpu_seconds(me).unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = tree_cpu_seconds(me).unwrap();
        assert!(b > a, "{a} -> {b}");
    }

    #[test]
    fn per_gib_and_per_op() {
        let c = ServerCpu::new(1, 2.0, 4 << 30, 1000);
        assert_eq!(c.seconds_per_gib, 0.5);
        assert_eq!(c.us_per_op, 2000.0);
        let none = ServerCpu::new(1, 1.0, 0, 0);
        assert_eq!((none.seconds_per_gib, none.us_per_op), (0.0, 0.0));
    }

    #[test]
    fn a_missing_process_gives_none() {
        // Above pid_max (at most 2^22 on Linux).
        assert!(tree_cpu_seconds(u32::MAX - 1).is_none());
    }
}
