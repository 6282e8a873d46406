//! Named profiles reproducing the brief's test matrix (mission §6):
//! diskspd multi-thread multi-file and single-file runs, fio-style runs,
//! single-thread runs, sequential throughput and metadata loops.

use crate::spec::{size_name, Mode, Spec};

pub const SIZES: [u32; 4] = [4 << 10, 8 << 10, 64 << 10, 1 << 20];

/// A named load shape; applied over [`Spec::default`] before explicit flags.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub about: String,
    /// Family (the name without the I/O size), for grouping in reports.
    pub family: String,
    apply: fn(&mut Spec),
    io_size: Option<u32>,
    read_pct: Option<u8>,
}

impl Profile {
    pub fn apply(&self, s: &mut Spec) {
        (self.apply)(s);
        if let Some(n) = self.io_size {
            s.io_size = n;
        }
        if let Some(r) = self.read_pct {
            s.read_pct = r;
        }
        s.profile = Some(self.name.clone());
    }
    pub fn io_size(&self) -> Option<u32> {
        self.io_size
    }
}

fn mtmf(s: &mut Spec) {
    // diskspd -r -t8 -o8 over 10 files.
    s.files = 10;
    s.file_size = 32 << 20;
    s.threads = 8;
    s.queue_depth = 8;
    s.random = true;
}
fn mtsf(s: &mut Spec) {
    s.files = 1;
    s.file_size = 256 << 20;
    s.threads = 8;
    s.queue_depth = 8;
    s.random = true;
}
fn st(s: &mut Spec) {
    s.files = 1;
    s.file_size = 64 << 20;
    s.threads = 1;
    s.queue_depth = 1;
    s.random = true;
}
fn fio(s: &mut Spec) {
    // fio --rw=randread --iodepth=64 --nrfiles=4
    s.files = 4;
    s.file_size = 64 << 20;
    s.threads = 1;
    s.queue_depth = 64;
    s.random = true;
}
fn seq(s: &mut Spec) {
    s.files = 1;
    s.file_size = 1 << 30;
    s.threads = 1;
    s.queue_depth = 16;
    s.random = false;
    s.io_size = 1 << 20;
}
fn metadata(s: &mut Spec) {
    s.mode = Mode::Metadata;
    s.threads = 8;
    s.queue_depth = 1;
    s.md_files = 64;
}
fn smoke(s: &mut Spec) {
    s.files = 2;
    s.file_size = 8 << 20;
    s.threads = 2;
    s.queue_depth = 4;
    s.random = true;
    s.io_size = 64 << 10;
    s.read_pct = 70;
    s.verify = true;
    s.duration = 5.0;
    s.warmup = 1.0;
}

/// Every named profile.
pub fn all() -> Vec<Profile> {
    let mut v = Vec::new();
    type Family = (&'static str, fn(&mut Spec), &'static str, [&'static str; 2]);
    let fams: [Family; 4] = [
        (
            "diskspd-mtmf",
            mtmf,
            "diskspd multi-thread multi-file: 10 files x 32 MiB, 8 threads, QD 8, random",
            ["read", "write"],
        ),
        (
            "diskspd-mtsf",
            mtsf,
            "diskspd multi-thread single-file: 1 file x 256 MiB, 8 threads, QD 8, random",
            ["read", "write"],
        ),
        (
            "diskspd-st",
            st,
            "single-thread: 1 file x 64 MiB, 1 thread, QD 1, random",
            ["read", "write"],
        ),
        (
            "fio",
            fio,
            "fio-style: 4 files x 64 MiB, QD 64, random",
            ["randread", "randwrite"],
        ),
    ];
    for (fam, f, about, rws) in fams {
        for rw in rws {
            let read = !rw.contains("write");
            for sz in SIZES {
                v.push(Profile {
                    name: format!("{fam}-{rw}-{}", size_name(sz as u64)),
                    about: format!("{about}, {} {}", size_name(sz as u64), rw),
                    family: format!("{fam}-{rw}"),
                    apply: f,
                    io_size: Some(sz),
                    read_pct: Some(if read { 100 } else { 0 }),
                });
            }
        }
    }
    v.push(Profile {
        name: "seqread-1m".into(),
        about: "sequential 1 MiB reads of one 1 GiB file, 1 thread, QD 16 (client ceiling vs smbclient get)".into(),
        family: "seqread".into(),
        apply: seq,
        io_size: None,
        read_pct: Some(100),
    });
    v.push(Profile {
        name: "seqwrite-1m".into(),
        about: "sequential 1 MiB writes to one 1 GiB file, 1 thread, QD 16".into(),
        family: "seqwrite".into(),
        apply: seq,
        io_size: None,
        read_pct: Some(0),
    });
    v.push(Profile {
        name: "metadata".into(),
        about: "create/close/open/stat/delete and mkdir/rmdir loops, 8 tasks x 64 small files each"
            .into(),
        family: "metadata".into(),
        apply: metadata,
        io_size: None,
        read_pct: None,
    });
    v.push(Profile {
        name: "smoke".into(),
        about:
            "5 s quick check: 2 files x 8 MiB, 2 threads x QD 4, 64 KiB random 70% read, verified"
                .into(),
        family: "smoke".into(),
        apply: smoke,
        io_size: None,
        read_pct: None,
    });
    v
}

pub fn find(name: &str) -> Option<Profile> {
    all().into_iter().find(|p| p.name == name)
}

/// Profiles matching a comma-separated list of names or `prefix*` globs.
pub fn select(list: &str) -> Result<Vec<Profile>, String> {
    let all = all();
    let mut out: Vec<Profile> = Vec::new();
    for pat in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let hits: Vec<&Profile> = match pat.strip_suffix('*') {
            Some(pre) => all.iter().filter(|p| p.name.starts_with(pre)).collect(),
            None => all.iter().filter(|p| p.name == pat).collect(),
        };
        if hits.is_empty() {
            return Err(format!(
                "no profile matches '{pat}' (see `braid bench profiles`)"
            ));
        }
        for h in hits {
            if !out.iter().any(|p| p.name == h.name) {
                out.push(h.clone());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn matrix_is_there() {
        let all = super::all();
        assert!(all.iter().any(|p| p.name == "diskspd-mtmf-read-4k"));
        assert!(all.iter().any(|p| p.name == "fio-randwrite-1m"));
        let sel = super::select("diskspd-mtmf-read-*").unwrap();
        assert_eq!(sel.len(), 4);
        let mut s = crate::spec::Spec::default();
        super::find("fio-randread-8k").unwrap().apply(&mut s);
        assert_eq!((s.files, s.queue_depth, s.io_size), (4, 64, 8192));
    }
}
