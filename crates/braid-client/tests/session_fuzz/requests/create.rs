//! CREATE requests (MS-SMB2 2.2.13): names from the fixture and from
//! outside the share, share modes that contend, and create contexts
//! (2.2.13.2) of the sizes their tags want, or not.

use super::{Fuzzer, HDR, MIB};
use rand::Rng;

const CONTEXT_TAGS: &[&[u8; 4]] = &[
    b"MxAc", b"QFid", b"RqLs", b"DHnQ", b"DH2Q", b"DHnC", b"DH2C", b"AlSi", b"TWrp", b"ExtA",
    b"SecD", b"AAPL", b"ZZZZ",
];

impl Fuzzer {
    pub fn create(&mut self) -> Vec<u8> {
        let name = self.name();
        let sane = self.rng.gen_bool(0.7);
        self.create_named(&name, sane)
    }

    /// An open of one of the fixture's files or directories with ordinary
    /// parameters, to keep valid handles in play.
    pub fn plain_open(&mut self) -> Vec<u8> {
        const FIXTURE: &[&str] = &["f0", "f1", "f2", "d0", "d0\\g0", "f0:s1", ""];
        let name: Vec<u16> = FIXTURE[self.rng.gen_range(0..FIXTURE.len())]
            .encode_utf16()
            .collect();
        self.create_named(&name, true)
    }

    /// A well-formed open of a fixture file asking for a batch or
    /// exclusive oplock or a lease (keys from a small set, shared by both
    /// clients), with the sharing and disposition clients use: the two
    /// clients' opens break each other's caching all the time.
    pub fn contended_open(&mut self) -> Vec<u8> {
        const FILES: &[&str] = &["f0", "f1", "f2", "f0:s1"];
        let name: Vec<u16> = FILES[self.rng.gen_range(0..FILES.len())]
            .encode_utf16()
            .collect();
        let name: Vec<u8> = name.iter().flat_map(|u| u.to_le_bytes()).collect();
        let lease = self.rng.gen_bool(0.5);
        let mut b = 57u16.to_le_bytes().to_vec();
        b.push(0);
        b.push(if lease {
            0xFF
        } else {
            [1u8, 8, 9, 9][self.rng.gen_range(0..4)]
        });
        b.extend(2u32.to_le_bytes());
        b.extend([0u8; 16]);
        let access = [0x0012_019Fu32, 0x0012_0089, 0x0200_0000, 0x0010_0080];
        b.extend(access[self.rng.gen_range(0..access.len())].to_le_bytes());
        b.extend(0x80u32.to_le_bytes());
        b.extend([7u32, 7, 7, 3, 1, 0][self.rng.gen_range(0..6)].to_le_bytes());
        b.extend([1u32, 1, 1, 3, 5][self.rng.gen_range(0..5)].to_le_bytes());
        b.extend(0x40u32.to_le_bytes()); // NON_DIRECTORY_FILE
        let name_off = HDR + 56;
        let ctx_off = (name_off + name.len()).next_multiple_of(8);
        b.extend((name_off as u16).to_le_bytes());
        b.extend((name.len() as u16).to_le_bytes());
        if !lease {
            b.extend([0u8; 8]);
            b.extend(&name);
            return b;
        }
        // MS-SMB2 2.2.13.2.10: SMB2_CREATE_REQUEST_LEASE_V2, state R, RH,
        // RW or RWH.
        let mut data = [self.rng.gen_range(1u8..4); 16].to_vec();
        data.extend([1u32, 3, 5, 7][self.rng.gen_range(0..4)].to_le_bytes());
        data.extend([0u8; 12]);
        data.extend([0u8; 16]);
        data.extend([0u8; 4]);
        let mut ctx = 0u32.to_le_bytes().to_vec();
        ctx.extend(16u16.to_le_bytes());
        ctx.extend(4u16.to_le_bytes());
        ctx.extend([0u8; 2]);
        ctx.extend(24u16.to_le_bytes());
        ctx.extend((data.len() as u32).to_le_bytes());
        ctx.extend(b"RqLs");
        ctx.extend([0u8; 4]);
        ctx.extend(data);
        b.extend((ctx_off as u32).to_le_bytes());
        b.extend((ctx.len() as u32).to_le_bytes());
        b.extend(&name);
        b.resize(ctx_off - HDR, 0);
        b.extend(ctx);
        b
    }

    /// A CREATE of `name`; with `sane`, access, share access, disposition
    /// and options that a client would send.
    pub fn create_named(&mut self, name: &[u16], sane: bool) -> Vec<u8> {
        let name: Vec<u8> = name.iter().flat_map(|u| u.to_le_bytes()).collect();
        let contexts = if self.rng.gen_bool(0.4) {
            self.contexts()
        } else {
            Vec::new()
        };
        let name_off = HDR + 56;
        let ctx_off = (name_off + name.len()).next_multiple_of(8);
        let mut b = Vec::new();
        b.extend(57u16.to_le_bytes());
        b.push(0); // SecurityFlags
        let oplock = if self.rng.gen_bool(0.4) {
            0
        } else {
            [1u8, 8, 9, 0xFF][self.rng.gen_range(0..4)]
        };
        b.push(oplock);
        b.extend(2u32.to_le_bytes()); // Impersonation
        b.extend([0u8; 16]); // SmbCreateFlags, Reserved
        const ACCESS: &[u32] = &[
            0x0012_019F, // read and write data
            0x0012_0089, // read
            0x0200_0000, // MAXIMUM_ALLOWED
            0x0001_0080, // DELETE | READ_ATTRIBUTES
            0x0010_0080, // READ_ATTRIBUTES | SYNCHRONIZE
            0x001F_01FF, // all
        ];
        let access = if sane {
            ACCESS[self.rng.gen_range(0..ACCESS.len())]
        } else {
            self.u32v()
        };
        b.extend(access.to_le_bytes());
        let attrs = if sane {
            [0u32, 0x80, 0x20, 0x02][self.rng.gen_range(0..4)]
        } else {
            self.u32v()
        };
        b.extend(attrs.to_le_bytes());
        b.extend(self.rng.gen_range(0u32..8).to_le_bytes()); // ShareAccess
        let disposition = if sane {
            [1u32, 1, 1, 3, 2, 5][self.rng.gen_range(0..6)]
        } else {
            self.rng.gen_range(0u32..7)
        };
        b.extend(disposition.to_le_bytes());
        let options: u32 = if sane {
            [0u32, 0x40, 0x01, 0x1040, 0x20, 0x0020_0000][self.rng.gen_range(0..6)]
        } else {
            self.u32v()
        };
        b.extend(options.to_le_bytes());
        b.extend((name_off as u16).to_le_bytes());
        b.extend((name.len() as u16).to_le_bytes());
        let (co, cl) = if contexts.is_empty() {
            (0, 0)
        } else {
            (ctx_off as u32, contexts.len() as u32)
        };
        b.extend(co.to_le_bytes());
        b.extend(cl.to_le_bytes());
        b.extend(&name);
        if name.is_empty() {
            b.push(0);
        }
        if !contexts.is_empty() {
            b.resize(ctx_off - HDR, 0);
            b.extend(contexts);
        }
        b
    }

    /// A chain of create contexts (MS-SMB2 2.2.13.2), each with data of
    /// the size its tag wants, or not.
    fn contexts(&mut self) -> Vec<u8> {
        let n = self.rng.gen_range(1..4);
        let mut out = Vec::new();
        for i in 0..n {
            let tag = CONTEXT_TAGS[self.rng.gen_range(0..CONTEXT_TAGS.len())];
            let data: Vec<u8> = match tag {
                b"RqLs" => {
                    let mut d = self.rng.gen::<[u8; 16]>().to_vec();
                    d.extend(self.rng.gen_range(0u32..8).to_le_bytes());
                    d.extend([0u8; 12]);
                    if self.rng.gen_bool(0.5) {
                        d.extend(self.rng.gen::<[u8; 16]>());
                        d.extend([0u8; 4]);
                    }
                    d
                }
                b"DH2Q" => {
                    let mut d = self.u32v().to_le_bytes().to_vec();
                    d.extend(self.rng.gen_range(0u32..4).to_le_bytes());
                    d.extend([0u8; 8]);
                    d.extend(self.rng.gen::<[u8; 16]>());
                    d
                }
                b"DHnC" => self.file_id().to_vec(),
                b"DH2C" => {
                    let mut d = self.file_id().to_vec();
                    d.extend(self.rng.gen::<[u8; 16]>());
                    d.extend(self.u32v().to_le_bytes());
                    d
                }
                b"DHnQ" => vec![0; 16],
                // A size that fits, so that no run fills the disk here.
                b"AlSi" => self.rng.gen_range(0..4 * MIB).to_le_bytes().to_vec(),
                b"TWrp" | b"MxAc" if self.rng.gen_bool(0.5) => self.u64v().to_le_bytes().to_vec(),
                b"AAPL" => {
                    let mut d = 1u32.to_le_bytes().to_vec();
                    d.extend([0u8; 4]);
                    d.extend(self.u64v().to_le_bytes());
                    d.extend(self.u64v().to_le_bytes());
                    d
                }
                _ => {
                    let n = self.rng.gen_range(0..80);
                    (0..n).map(|_| self.rng.gen()).collect()
                }
            };
            let len = (24 + data.len()).next_multiple_of(8);
            let next = if i + 1 < n { len as u32 } else { 0 };
            out.extend(next.to_le_bytes());
            out.extend(16u16.to_le_bytes());
            out.extend(4u16.to_le_bytes());
            out.extend([0u8; 2]);
            out.extend((if data.is_empty() { 0u16 } else { 24 }).to_le_bytes());
            out.extend((data.len() as u32).to_le_bytes());
            out.extend(tag);
            out.extend([0u8; 4]);
            out.extend(&data);
            if i + 1 < n {
                out.resize(out.len().next_multiple_of(8), 0);
            }
        }
        out
    }
}
