//! File operations on a [`Client`]: paths are absolute in the server's
//! pseudo file system ("/share/dir/file"); directory handles are cached
//! (as a client's dentry cache would), so an operation on a file is one
//! COMPOUND from its directory's handle.

use crate::client::Client;
use crate::{Error, Result};
use braid_nfs_proto::nfs4::attr::{decode_attrs, Bitmap};
use braid_nfs_proto::nfs4::*;
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// A file handle.
pub type Fh = Vec<u8>;

/// OPEN's share access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Both,
}

/// How OPEN creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// Open an existing file only.
    No,
    /// Create, or open an existing file (createmode UNCHECKED4).
    Unchecked,
    /// Create; an existing file is NFS4ERR_EXIST (createmode GUARDED4).
    Guarded,
}

/// WRITE's stable_how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stable {
    Unstable,
    DataSync,
    FileSync,
}

/// The attributes the client asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attrs {
    pub size: u64,
    pub is_dir: bool,
    pub fileid: u64,
    pub change: u64,
}

/// An open file: its handle and open stateid.
#[derive(Debug, Clone)]
pub struct OpenFile {
    pub fh: Fh,
    pub stateid: stateid4,
    pub attrs: Attrs,
}

fn attr_request() -> bitmap4 {
    Bitmap::from_bits(&[FATTR4_TYPE, FATTR4_CHANGE, FATTR4_SIZE, FATTR4_FILEID]).into()
}

fn attrs_of(f: &fattr4) -> Result<Attrs> {
    let a = decode_attrs(f).map_err(|e| Error::Protocol(format!("attributes: {e}")))?;
    Ok(Attrs {
        size: a.size.unwrap_or(0),
        is_dir: a.r#type == Some(NF4DIR),
        fileid: a.fileid.unwrap_or(0),
        change: a.change.unwrap_or(0),
    })
}

fn split(path: &str) -> (String, &str) {
    let p = path.trim_end_matches('/');
    match p.rsplit_once('/') {
        Some((d, n)) => (if d.is_empty() { "/".into() } else { d.into() }, n),
        None => ("/".into(), p),
    }
}

fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty() && *c != ".")
}

fn unexpected(what: &str) -> Error {
    Error::Protocol(format!("{what}: unexpected result"))
}

/// No stateid: the special all-zero one (RFC 8881 8.2.3).
pub const ANONYMOUS: stateid4 = stateid4 {
    seqid: 0,
    other: [0; 12],
};

impl Client {
    /// The handle of `path` (PUTROOTFH, LOOKUP per component, GETFH).
    pub async fn lookup(&self, path: &str) -> Result<Fh> {
        let mut ops = vec![nfs_argop4::OP_PUTROOTFH];
        for c in components(path) {
            ops.push(nfs_argop4::OP_LOOKUP(LOOKUP4args {
                objname: c.as_bytes().to_vec(),
            }));
        }
        ops.push(nfs_argop4::OP_GETFH);
        match self.compound(ops).await?.pop() {
            Some(nfs_resop4::OP_GETFH(GETFH4res::NFS4_OK(ok))) => Ok(ok.object),
            _ => Err(unexpected("GETFH")),
        }
    }

    /// A directory's handle, from the cache or by LOOKUP.
    pub async fn dir(&self, path: &str) -> Result<Fh> {
        let key = format!("/{}", components(path).collect::<Vec<_>>().join("/"));
        if let Some(fh) = self.dir_cache.lock().expect("dir cache").get(&key) {
            return Ok(fh.clone());
        }
        let fh = self.lookup(&key).await?;
        self.dir_cache
            .lock()
            .expect("dir cache")
            .insert(key, fh.clone());
        Ok(fh)
    }

    fn forget_dir(&self, path: &str) {
        let key = format!("/{}", components(path).collect::<Vec<_>>().join("/"));
        self.dir_cache.lock().expect("dir cache").remove(&key);
    }

    /// GETATTR: size, type, fileid, change.
    pub async fn getattr(&self, fh: &Fh) -> Result<Attrs> {
        let r = self
            .compound(vec![
                nfs_argop4::OP_PUTFH(PUTFH4args { object: fh.clone() }),
                nfs_argop4::OP_GETATTR(GETATTR4args {
                    attr_request: attr_request(),
                }),
            ])
            .await?;
        match r.last() {
            Some(nfs_resop4::OP_GETATTR(GETATTR4res::NFS4_OK(ok))) => attrs_of(&ok.obj_attributes),
            _ => Err(unexpected("GETATTR")),
        }
    }

    /// OPEN `path` (claim NULL from its directory), then GETFH and GETATTR.
    pub async fn open(&self, path: &str, access: Access, create: Create) -> Result<OpenFile> {
        let (d, name) = split(path);
        let dir = self.dir(&d).await?;
        let share_access = match access {
            Access::Read => OPEN4_SHARE_ACCESS_READ,
            Access::Write => OPEN4_SHARE_ACCESS_WRITE,
            Access::Both => OPEN4_SHARE_ACCESS_BOTH,
        } | OPEN4_SHARE_ACCESS_WANT_NO_DELEG;
        let empty = fattr4 {
            attrmask: Vec::new(),
            attr_vals: Vec::new(),
        };
        let openhow = match create {
            Create::No => openflag4::Default(OPEN4_NOCREATE),
            Create::Unchecked => openflag4::OPEN4_CREATE(createhow4::UNCHECKED4(empty)),
            Create::Guarded => openflag4::OPEN4_CREATE(createhow4::GUARDED4(empty)),
        };
        // One open owner per open: no server-side serialisation between
        // opens of different tasks.
        let n = self.owner_seq.fetch_add(1, Ordering::Relaxed);
        let r = self
            .compound(vec![
                nfs_argop4::OP_PUTFH(PUTFH4args { object: dir }),
                nfs_argop4::OP_OPEN(OPEN4args {
                    seqid: 0,
                    share_access,
                    share_deny: OPEN4_SHARE_DENY_NONE,
                    owner: open_owner4 {
                        clientid: self.clientid(),
                        owner: format!("o{n}").into_bytes(),
                    },
                    openhow,
                    claim: open_claim4::CLAIM_NULL(name.as_bytes().to_vec()),
                }),
                nfs_argop4::OP_GETFH,
                nfs_argop4::OP_GETATTR(GETATTR4args {
                    attr_request: attr_request(),
                }),
            ])
            .await?;
        let mut it = r.into_iter().skip(1);
        let stateid = match it.next() {
            Some(nfs_resop4::OP_OPEN(OPEN4res::NFS4_OK(ok))) => ok.stateid,
            _ => return Err(unexpected("OPEN")),
        };
        let fh = match it.next() {
            Some(nfs_resop4::OP_GETFH(GETFH4res::NFS4_OK(ok))) => ok.object,
            _ => return Err(unexpected("GETFH")),
        };
        let attrs = match it.next() {
            Some(nfs_resop4::OP_GETATTR(GETATTR4res::NFS4_OK(ok))) => attrs_of(&ok.obj_attributes)?,
            _ => return Err(unexpected("GETATTR")),
        };
        Ok(OpenFile { fh, stateid, attrs })
    }

    /// The stateid READ/WRITE use: the open's, "current seqid" (0).
    fn io_stateid(f: &OpenFile) -> stateid4 {
        stateid4 {
            seqid: 0,
            other: f.stateid.other,
        }
    }

    /// READ: the data and eof.
    pub async fn read(&self, f: &OpenFile, offset: u64, count: u32) -> Result<(Bytes, bool)> {
        let r = self
            .compound(vec![
                nfs_argop4::OP_PUTFH(PUTFH4args {
                    object: f.fh.clone(),
                }),
                nfs_argop4::OP_READ(READ4args {
                    stateid: Self::io_stateid(f),
                    offset,
                    count: count.min(self.max_read()),
                }),
            ])
            .await?;
        match r.into_iter().nth(1) {
            Some(nfs_resop4::OP_READ(READ4res::NFS4_OK(ok))) => Ok((ok.data, ok.eof)),
            _ => Err(unexpected("READ")),
        }
    }

    /// WRITE: the count written and how stable.
    pub async fn write(
        &self,
        f: &OpenFile,
        offset: u64,
        data: Bytes,
        stable: Stable,
    ) -> Result<(u32, stable_how4)> {
        let stable = match stable {
            Stable::Unstable => UNSTABLE4,
            Stable::DataSync => DATA_SYNC4,
            Stable::FileSync => FILE_SYNC4,
        };
        let r = self
            .compound(vec![
                nfs_argop4::OP_PUTFH(PUTFH4args {
                    object: f.fh.clone(),
                }),
                nfs_argop4::OP_WRITE(WRITE4args {
                    stateid: Self::io_stateid(f),
                    offset,
                    stable,
                    data,
                }),
            ])
            .await?;
        match r.into_iter().nth(1) {
            Some(nfs_resop4::OP_WRITE(WRITE4res::NFS4_OK(ok))) => Ok((ok.count, ok.committed)),
            _ => Err(unexpected("WRITE")),
        }
    }

    /// COMMIT the whole file.
    pub async fn commit(&self, fh: &Fh) -> Result<verifier4> {
        let r = self
            .compound(vec![
                nfs_argop4::OP_PUTFH(PUTFH4args { object: fh.clone() }),
                nfs_argop4::OP_COMMIT(COMMIT4args {
                    offset: 0,
                    count: 0,
                }),
            ])
            .await?;
        match r.into_iter().nth(1) {
            Some(nfs_resop4::OP_COMMIT(COMMIT4res::NFS4_OK(ok))) => Ok(ok.writeverf),
            _ => Err(unexpected("COMMIT")),
        }
    }

    /// SETATTR size (truncate or extend) under the open's stateid.
    pub async fn set_size(&self, f: &OpenFile, size: u64) -> Result<()> {
        let mut w = braid_nfs_proto::xdr::XdrWriter::new();
        w.put_u64(size);
        self.compound(vec![
            nfs_argop4::OP_PUTFH(PUTFH4args {
                object: f.fh.clone(),
            }),
            nfs_argop4::OP_SETATTR(SETATTR4args {
                stateid: Self::io_stateid(f),
                obj_attributes: fattr4 {
                    attrmask: Bitmap::from_bits(&[FATTR4_SIZE]).into(),
                    attr_vals: w.into_vec(),
                },
            }),
        ])
        .await?;
        Ok(())
    }

    /// CLOSE.
    pub async fn close(&self, f: &OpenFile) -> Result<()> {
        self.compound(vec![
            nfs_argop4::OP_PUTFH(PUTFH4args {
                object: f.fh.clone(),
            }),
            nfs_argop4::OP_CLOSE(CLOSE4args {
                seqid: 0,
                open_stateid: f.stateid.clone(),
            }),
        ])
        .await?;
        Ok(())
    }

    /// REMOVE a file or an empty directory.
    pub async fn remove(&self, path: &str) -> Result<()> {
        let (d, name) = split(path);
        let dir = self.dir(&d).await?;
        self.compound(vec![
            nfs_argop4::OP_PUTFH(PUTFH4args { object: dir }),
            nfs_argop4::OP_REMOVE(REMOVE4args {
                target: name.as_bytes().to_vec(),
            }),
        ])
        .await?;
        self.forget_dir(path);
        Ok(())
    }

    /// CREATE a directory (mode 0755); NFS4ERR_EXIST when it exists.
    pub async fn mkdir(&self, path: &str) -> Result<()> {
        let (d, name) = split(path);
        let dir = self.dir(&d).await?;
        let mut w = braid_nfs_proto::xdr::XdrWriter::new();
        w.put_u32(0o755);
        let r = self
            .compound(vec![
                nfs_argop4::OP_PUTFH(PUTFH4args { object: dir }),
                nfs_argop4::OP_CREATE(CREATE4args {
                    objtype: createtype4::NF4DIR,
                    objname: name.as_bytes().to_vec(),
                    createattrs: fattr4 {
                        attrmask: Bitmap::from_bits(&[FATTR4_MODE]).into(),
                        attr_vals: w.into_vec(),
                    },
                }),
                nfs_argop4::OP_GETFH,
            ])
            .await?;
        if let Some(nfs_resop4::OP_GETFH(GETFH4res::NFS4_OK(ok))) = r.into_iter().nth(2) {
            let key = format!("/{}", components(path).collect::<Vec<_>>().join("/"));
            self.dir_cache
                .lock()
                .expect("dir cache")
                .insert(key, ok.object);
        }
        Ok(())
    }

    /// `mkdir -p`: components that exist are looked up, not created.
    pub async fn mkdir_all(&self, path: &str) -> Result<()> {
        let mut cur = String::new();
        for c in components(path) {
            cur.push('/');
            cur.push_str(c);
            match self.dir(&cur).await {
                Ok(_) => continue,
                Err(e) if e.status() == Some(NFS4ERR_NOENT) => {}
                Err(e) => return Err(e),
            }
            match self.mkdir(&cur).await {
                Ok(()) => {}
                Err(e) if e.status() == Some(NFS4ERR_EXIST) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// READDIR: every name in the directory (no attributes).
    pub async fn readdir(&self, path: &str) -> Result<Vec<String>> {
        let fh = self.lookup(path).await?;
        let (mut cookie, mut verf) = (0u64, [0u8; 8]);
        let mut names = Vec::new();
        loop {
            let r = self
                .compound(vec![
                    nfs_argop4::OP_PUTFH(PUTFH4args { object: fh.clone() }),
                    nfs_argop4::OP_READDIR(READDIR4args {
                        cookie,
                        cookieverf: verf,
                        dircount: 8192,
                        maxcount: 32768,
                        attr_request: Vec::new(),
                    }),
                ])
                .await?;
            match r.into_iter().nth(1) {
                Some(nfs_resop4::OP_READDIR(READDIR4res::NFS4_OK(ok))) => {
                    verf = ok.cookieverf;
                    for e in &ok.reply.entries {
                        names.push(String::from_utf8_lossy(&e.name).into_owned());
                        cookie = e.cookie;
                    }
                    if ok.reply.eof || ok.reply.entries.is_empty() {
                        return Ok(names);
                    }
                }
                _ => return Err(unexpected("READDIR")),
            }
        }
    }
}
