//! The hostile requests: each built valid from its MS-SMB2 structure, then
//! often damaged.

use braid_smb_proto::Command;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::Rng;

mod create;

/// Where the request structure starts in the message: file names and
/// buffers are placed by offsets counted from the SMB2 header.
pub const HDR: usize = 64;
const MIB: u64 = 1 << 20;

/// File system control codes Braid implements or names (MS-FSCC 2.3,
/// MS-SMB2 2.2.31), and a few it does not. Not FSCTL_VALIDATE_NEGOTIATE_INFO:
/// a server must end the connection when that one fails (MS-SMB2
/// 3.3.5.15.12), which tests/e2e covers.
const CTL_CODES: &[u32] = &[
    0x0006_0194, // FSCTL_DFS_GET_REFERRALS
    0x0011_400C, // FSCTL_PIPE_PEEK
    0x0011_0018, // FSCTL_PIPE_WAIT
    0x0011_C017, // FSCTL_PIPE_TRANSCEIVE
    0x0014_40F2, // FSCTL_SRV_COPYCHUNK
    0x0014_80F2, // FSCTL_SRV_COPYCHUNK_WRITE
    0x0014_4064, // FSCTL_SRV_ENUMERATE_SNAPSHOTS
    0x0014_0078, // FSCTL_SRV_REQUEST_RESUME_KEY
    0x0014_41BB, // FSCTL_SRV_READ_HASH
    0x0014_01D4, // FSCTL_LMR_REQUEST_RESILIENCY
    0x0014_01FC, // FSCTL_QUERY_NETWORK_INTERFACE_INFO
    0x0009_00C4, // FSCTL_SET_SPARSE
    0x0009_80C8, // FSCTL_SET_ZERO_DATA
    0x0009_40CF, // FSCTL_QUERY_ALLOCATED_RANGES
    0x0009_8344, // FSCTL_DUPLICATE_EXTENTS_TO_FILE
    0x0009_8208, // FSCTL_FILE_LEVEL_TRIM
    0x0009_00A8, // FSCTL_GET_REPARSE_POINT
    0x0009_00A4, // FSCTL_SET_REPARSE_POINT
    0x0009_003C, // FSCTL_GET_COMPRESSION
    0x0009_C040, // FSCTL_SET_COMPRESSION
    0x0009_0064, // FSCTL_GET_NTFS_VOLUME_DATA
    0x0009_009C, // FSCTL_GET_OBJECT_ID
    0x0009_00C0, // FSCTL_CREATE_OR_GET_OBJECT_ID
    0x0009_027C, // FSCTL_GET_INTEGRITY_INFORMATION
    0x0009_0284, // FSCTL_QUERY_FILE_REGIONS
    0x0009_4264, // FSCTL_OFFLOAD_READ
];

/// Names a request may carry: the fixture's files, streams, wildcards, and
/// ways out of the share that must all be refused.
const NAMES: &[&str] = &[
    "f0",
    "f1",
    "f2",
    "d0",
    "d0\\g0",
    "d0\\g1",
    "f0:s1",
    "f0:s1:$DATA",
    "f0::$DATA",
    "f0:s2:$INDEX_ALLOCATION",
    "d0:s3",
    "new0",
    "d0\\new1",
    "..",
    "..\\escape",
    "d0\\..\\..\\escape",
    "\\escape",
    "d0/../../escape",
    "*",
    "d0\\*",
    "f?",
    "<",
    "",
    "$Extend\\$Quota:$Q:$INDEX_ALLOCATION",
    "PIPE\\srvsvc",
    "f0\\sub",
    ". ",
    "con",
];

pub struct Fuzzer {
    pub rng: StdRng,
    /// FileIds of opens the server granted and that are not closed yet.
    pub open: Vec<[u8; 16]>,
    /// Ids closed since: using them again must be FILE_CLOSED, not harm.
    pub closed: Vec<[u8; 16]>,
    /// The FileId every request built now carries (the all-ones id of a
    /// related compound).
    pub force_id: Option<[u8; 16]>,
}

impl Fuzzer {
    fn u32v(&mut self) -> u32 {
        const EDGES: &[u32] = &[
            0,
            1,
            2,
            7,
            8,
            0x7F,
            0x80,
            0xFF,
            0x100,
            0xFFFF,
            0x1_0000,
            0x10_0000,
            0x80_0000,
            0x7FFF_FFFF,
            0x8000_0000,
            0xFFFF_FFFE,
            0xFFFF_FFFF,
        ];
        if self.rng.gen_bool(0.6) {
            EDGES[self.rng.gen_range(0..EDGES.len())]
        } else {
            self.rng.gen()
        }
    }

    /// An offset or size: boundary values, small ones, and (never more
    /// than a few MiB) the sizes that make the server allocate.
    fn u64v(&mut self) -> u64 {
        const EDGES: &[u64] = &[
            0,
            1,
            511,
            4096,
            65536,
            MIB,
            4 * MIB,
            (1 << 31) - 1,
            1 << 32,
            (1 << 40) + 7,
            i64::MAX as u64 - 1,
            i64::MAX as u64,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ];
        match self.rng.gen_range(0..4) {
            0 => self.rng.gen_range(0..8192),
            1 => self.rng.gen(),
            _ => EDGES[self.rng.gen_range(0..EDGES.len())],
        }
    }

    /// Up to `max - 1` bytes of the run's own randomness.
    fn bytes(&mut self, max: usize) -> Bytes {
        let n = self.rng.gen_range(0..max);
        Bytes::from((0..n).map(|_| self.rng.gen::<u8>()).collect::<Vec<u8>>())
    }

    fn file_id(&mut self) -> [u8; 16] {
        if let Some(id) = self.force_id {
            return id;
        }
        match self.rng.gen_range(0..20) {
            0 => [0xFF; 16],
            1 => [0; 16],
            2 => self.rng.gen(),
            3 if !self.closed.is_empty() => self.closed[self.rng.gen_range(0..self.closed.len())],
            _ if !self.open.is_empty() => self.open[self.rng.gen_range(0..self.open.len())],
            _ => self.rng.gen(),
        }
    }

    /// A name as UTF-16: one of [`NAMES`], or random units (lone
    /// surrogates, control characters, separators and all).
    fn name(&mut self) -> Vec<u16> {
        if self.rng.gen_bool(0.85) {
            return NAMES[self.rng.gen_range(0..NAMES.len())]
                .encode_utf16()
                .collect();
        }
        const UNITS: &[u16] = &[
            b'a' as u16,
            b'\\' as u16,
            b'/' as u16,
            b':' as u16,
            b'.' as u16,
            b'*' as u16,
            0,
            0x1F,
            0xD800,
            0xDC00,
            0xFFFF,
            0x00E9,
            b' ' as u16,
        ];
        let n = self.rng.gen_range(0..300);
        (0..n)
            .map(|_| UNITS[self.rng.gen_range(0..UNITS.len())])
            .collect()
    }

    /// Damage `b` in place: a few fields set to boundary values, bytes
    /// flipped, the end cut off or random bytes added.
    fn damage(&mut self, b: &mut Vec<u8>) {
        for _ in 0..self.rng.gen_range(1..4) {
            match self.rng.gen_range(0..5) {
                0 if b.len() >= 4 => {
                    let at = self.rng.gen_range(0..=b.len() - 4);
                    let v = self.u32v();
                    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
                }
                1 if b.len() >= 2 => {
                    let at = self.rng.gen_range(0..=b.len() - 2);
                    let v = self.u32v() as u16;
                    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
                }
                2 if !b.is_empty() => {
                    let at = self.rng.gen_range(0..b.len());
                    b[at] ^= 1 << self.rng.gen_range(0..8);
                }
                3 => {
                    let keep = self.rng.gen_range(0..=b.len());
                    b.truncate(keep);
                }
                _ => {
                    let n = self.rng.gen_range(1..64);
                    b.extend((0..n).map(|_| self.rng.gen::<u8>()));
                }
            }
        }
    }

    /// MS-SMB2 2.2.9 TREE_CONNECT of the share, IPC$, shares that do not
    /// exist and paths that are not share paths; sometimes with the 3.1.1
    /// extension (2.2.9.1) and a tree connect context whose offset and
    /// count may point anywhere. A tree it connects stays until the
    /// session ends.
    fn tree_connect(&mut self) -> Vec<u8> {
        const PATHS: &[&str] = &[
            "\\\\127.0.0.1\\share",
            "\\\\127.0.0.1\\IPC$",
            "\\\\X\\SHARE\\",
            "\\\\x\\nosuch",
            "\\\\x\\share\\d0",
            "\\\\x\\",
            "\\\\x\\..",
            "\\\\x\\share:s1",
            "\\\\\\share",
            "share",
            "",
        ];
        let path: Vec<u8> = PATHS[self.rng.gen_range(0..PATHS.len())]
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        // SMB2_TREE_CONNECT_FLAG_CLUSTER_RECONNECT, _REDIRECT_TO_OWNER,
        // _EXTENSION_PRESENT.
        let flags: u16 = match self.rng.gen_range(0..4) {
            0 => 0,
            1 => 4,
            2 => 3,
            _ => self.rng.gen(),
        };
        let mut b = 9u16.to_le_bytes().to_vec();
        b.extend(flags.to_le_bytes());
        if flags & 4 == 0 {
            b.extend(((HDR + 8) as u16).to_le_bytes());
            b.extend((path.len() as u16).to_le_bytes());
            b.extend(&path);
            return b;
        }
        // The extension: context offset (from its start) and count, 10
        // reserved bytes, then the path, which PathOffset points at.
        let ext = HDR + 8;
        b.extend(((ext + 16) as u16).to_le_bytes());
        b.extend((path.len() as u16).to_le_bytes());
        let ctx_at = (16 + path.len()).next_multiple_of(8);
        let offset = match self.rng.gen_range(0..3) {
            0 => ctx_at as u32,
            1 => 0,
            _ => self.u32v(),
        };
        b.extend(offset.to_le_bytes());
        let count: u16 = match self.rng.gen_range(0..3) {
            0 => 0,
            1 => 1,
            _ => self.rng.gen(),
        };
        b.extend(count.to_le_bytes());
        b.extend([0u8; 10]);
        b.extend(&path);
        b.resize(8 + ctx_at, 0);
        // SMB2_REMOTED_IDENTITY_TREE_CONNECT (2.2.9.2.1), its data random.
        let data_len = self.rng.gen_range(0..200u16);
        b.extend(1u16.to_le_bytes());
        b.extend(data_len.to_le_bytes());
        b.extend([0u8; 4]);
        b.extend((0..data_len).map(|_| self.rng.gen::<u8>()));
        b
    }

    fn close(&mut self) -> Vec<u8> {
        let mut b = 24u16.to_le_bytes().to_vec();
        b.extend(self.rng.gen_range(0u16..2).to_le_bytes());
        b.extend([0u8; 4]);
        b.extend(self.file_id());
        b
    }

    fn flush(&mut self) -> Vec<u8> {
        let mut b = 24u16.to_le_bytes().to_vec();
        b.extend([0u8; 6]);
        b.extend(self.file_id());
        b
    }

    fn read(&mut self) -> (Vec<u8>, usize) {
        let len = match self.rng.gen_range(0..4) {
            0 => self.rng.gen_range(0..4096),
            1 => 65536,
            2 => MIB as u32,
            _ => self.u32v(),
        };
        let mut b = 49u16.to_le_bytes().to_vec();
        b.push(0x50);
        b.push(self.rng.gen_range(0..4));
        b.extend(len.to_le_bytes());
        b.extend(self.u64v().to_le_bytes());
        b.extend(self.file_id());
        b.extend(self.rng.gen_range(0u32..8).to_le_bytes()); // MinimumCount
        b.extend(self.rng.gen_range(0u32..4).to_le_bytes()); // Channel
        b.extend([0u8; 8]);
        b.push(0);
        (b, (len as usize).min(8 << 20))
    }

    fn write(&mut self) -> Vec<u8> {
        let data = self.bytes(8192);
        let mut b = 49u16.to_le_bytes().to_vec();
        b.extend(((HDR + 48) as u16).to_le_bytes());
        b.extend((data.len() as u32).to_le_bytes());
        // Far-off offsets only where the file system makes a hole.
        let offset = if self.rng.gen_bool(0.8) {
            self.rng.gen_range(0..MIB)
        } else {
            self.u64v()
        };
        b.extend(offset.to_le_bytes());
        b.extend(self.file_id());
        b.extend(self.rng.gen_range(0u32..4).to_le_bytes()); // Channel
        b.extend([0u8; 8]);
        b.extend(self.rng.gen_range(0u32..4).to_le_bytes()); // Flags
        b.extend(&data);
        b
    }

    fn lock(&mut self) -> Vec<u8> {
        let n = self.rng.gen_range(0..4);
        let mut b = 48u16.to_le_bytes().to_vec();
        b.extend((n as u16).to_le_bytes());
        b.extend(self.u32v().to_le_bytes()); // LockSequence
        b.extend(self.file_id());
        for _ in 0..n {
            b.extend(self.u64v().to_le_bytes());
            b.extend(self.u64v().to_le_bytes());
            // Mostly FAIL_IMMEDIATELY: a lock that waits would hold up
            // the run until the request times out.
            let flags: u32 = match self.rng.gen_range(0..6) {
                0 => 0x11,
                1 => 0x12,
                2 => 0x04,
                3 => self.u32v() | 0x10,
                _ => [0x01, 0x02, 0x05, 0x06][self.rng.gen_range(0..4)] | 0x10,
            };
            b.extend(flags.to_le_bytes());
            b.extend([0u8; 4]);
        }
        b
    }

    fn ioctl(&mut self) -> Vec<u8> {
        let ctl = if self.rng.gen_bool(0.9) {
            CTL_CODES[self.rng.gen_range(0..CTL_CODES.len())]
        } else {
            self.u32v()
        };
        let input: Vec<u8> = match self.rng.gen_range(0..3) {
            0 => Vec::new(),
            1 => {
                // Offsets and lengths, the shape of most file-level ones.
                let mut d = Vec::new();
                for _ in 0..self.rng.gen_range(1..6) {
                    d.extend(self.u64v().to_le_bytes());
                }
                d
            }
            _ => self.bytes(300).to_vec(),
        };
        let mut b = 57u16.to_le_bytes().to_vec();
        b.extend([0u8; 2]);
        b.extend(ctl.to_le_bytes());
        b.extend(self.file_id());
        let in_off = if input.is_empty() { 0 } else { HDR as u32 + 56 };
        b.extend(in_off.to_le_bytes());
        b.extend((input.len() as u32).to_le_bytes());
        b.extend(0u32.to_le_bytes()); // MaxInputResponse
        b.extend(0u32.to_le_bytes()); // OutputOffset
        b.extend(0u32.to_le_bytes()); // OutputCount
        let max_out = [0u32, 16, 4096, 65536][self.rng.gen_range(0..4)];
        b.extend(max_out.to_le_bytes());
        b.extend(self.rng.gen_range(0u32..2).to_le_bytes()); // SMB2_0_IOCTL_IS_FSCTL
        b.extend([0u8; 4]);
        b.extend(input);
        b
    }

    fn query_directory(&mut self) -> Vec<u8> {
        let pattern: Vec<u8> = self.name().iter().flat_map(|u| u.to_le_bytes()).collect();
        const CLASSES: &[u8] = &[1, 2, 3, 0x0C, 0x25, 0x26, 0x3C, 0x3F];
        let class = if self.rng.gen_bool(0.8) {
            CLASSES[self.rng.gen_range(0..CLASSES.len())]
        } else {
            self.rng.gen()
        };
        let mut b = 33u16.to_le_bytes().to_vec();
        b.push(class);
        b.push(self.rng.gen_range(0..0x20));
        b.extend(self.u32v().to_le_bytes()); // FileIndex
        b.extend(self.file_id());
        b.extend(((HDR + 32) as u16).to_le_bytes());
        b.extend((pattern.len() as u16).to_le_bytes());
        b.extend([0u32, 8, 100, 4096, 65536][self.rng.gen_range(0..5)].to_le_bytes());
        b.extend(&pattern);
        if pattern.is_empty() {
            b.push(0);
        }
        b
    }

    fn query_info(&mut self) -> Vec<u8> {
        let info_type = self.rng.gen_range(0u8..6);
        let input = if self.rng.gen_bool(0.3) {
            self.bytes(64).to_vec()
        } else {
            Vec::new()
        };
        let mut b = 41u16.to_le_bytes().to_vec();
        b.push(info_type);
        b.push(self.rng.gen_range(0..0x50));
        b.extend([0u32, 8, 24, 100, 4096, 65536][self.rng.gen_range(0..6)].to_le_bytes());
        let in_off = if input.is_empty() {
            0u16
        } else {
            HDR as u16 + 40
        };
        b.extend(in_off.to_le_bytes());
        b.extend([0u8; 2]);
        b.extend((input.len() as u32).to_le_bytes());
        b.extend(self.rng.gen_range(0u32..0x20).to_le_bytes()); // AdditionalInformation
        b.extend(self.rng.gen_range(0u32..4).to_le_bytes()); // Flags
        b.extend(self.file_id());
        b.extend(&input);
        if input.is_empty() {
            b.push(0);
        }
        b
    }

    fn set_info(&mut self) -> Vec<u8> {
        let (info_type, class, buf): (u8, u8, Vec<u8>) = match self.rng.gen_range(0..10) {
            0 => {
                // FileBasicInformation: four times and the attributes.
                let mut d = Vec::new();
                for _ in 0..4 {
                    d.extend(self.u64v().to_le_bytes());
                }
                d.extend(self.u32v().to_le_bytes());
                d.extend([0u8; 4]);
                (1, 4, d)
            }
            1 | 2 => {
                // FileRenameInformation or FileLinkInformation.
                let name: Vec<u8> = self.name().iter().flat_map(|u| u.to_le_bytes()).collect();
                let mut d = vec![self.rng.gen_range(0..2), 0, 0, 0, 0, 0, 0, 0];
                d.extend(0u64.to_le_bytes());
                d.extend((name.len() as u32).to_le_bytes());
                d.extend(&name);
                (1, if self.rng.gen_bool(0.7) { 10 } else { 11 }, d)
            }
            3 => (1, 13, vec![self.rng.gen_range(0..2)]),
            // End of file and allocation: sizes that fit on any disk.
            4 => (1, 20, self.rng.gen_range(0..4 * MIB).to_le_bytes().to_vec()),
            5 => (1, 19, self.rng.gen_range(0..4 * MIB).to_le_bytes().to_vec()),
            6 => (1, 14, self.u64v().to_le_bytes().to_vec()),
            7 => (3, 0, self.bytes(120).to_vec()),
            8 => (
                1,
                0x40,
                (self.rng.gen_range(0u32..0x20)).to_le_bytes().to_vec(),
            ),
            _ => (
                self.rng.gen_range(1..5),
                self.rng.gen(),
                self.bytes(100).to_vec(),
            ),
        };
        let mut b = 33u16.to_le_bytes().to_vec();
        b.push(info_type);
        b.push(class);
        b.extend((buf.len() as u32).to_le_bytes());
        b.extend(((HDR + 32) as u16).to_le_bytes());
        b.extend([0u8; 2]);
        b.extend(self.rng.gen_range(0u32..0x10).to_le_bytes()); // AdditionalInformation
        b.extend(self.file_id());
        b.extend(&buf);
        if buf.is_empty() {
            b.push(0);
        }
        b
    }

    fn oplock_break(&mut self) -> Vec<u8> {
        if self.rng.gen_bool(0.5) {
            let mut b = 24u16.to_le_bytes().to_vec();
            b.push([0u8, 1, 8, 9][self.rng.gen_range(0..4)]);
            b.extend([0u8; 5]);
            b.extend(self.file_id());
            b
        } else {
            let mut b = 36u16.to_le_bytes().to_vec();
            b.extend([0u8; 6]);
            b.extend(self.rng.gen::<[u8; 16]>());
            b.extend(self.rng.gen_range(0u32..8).to_le_bytes());
            b.extend(self.u64v().to_le_bytes());
            b
        }
    }

    /// The next request: its command, structure and expected response size.
    pub fn next(&mut self) -> (Command, Vec<u8>, usize) {
        if self.open.len() < 4 {
            return (Command::Create, self.plain_open(), 4096);
        }
        if self.open.len() > 64 {
            let mut b = 24u16.to_le_bytes().to_vec();
            b.extend([0u8; 6]);
            b.extend(self.open[0]);
            return (Command::Close, b, 0);
        }
        let (cmd, mut body, expect) = match self.rng.gen_range(0..100) {
            0..=9 => return (Command::Create, self.contended_open(), 4096),
            10..=24 => (Command::Create, self.create(), 4096),
            25..=32 => (Command::Close, self.close(), 0),
            33..=34 => (Command::Flush, self.flush(), 0),
            35..=44 => {
                let (b, n) = self.read();
                (Command::Read, b, n)
            }
            45..=52 => (Command::Write, self.write(), 0),
            53..=58 => (Command::Lock, self.lock(), 0),
            59..=68 => (Command::Ioctl, self.ioctl(), 65536),
            69..=75 => (Command::QueryDirectory, self.query_directory(), 65536),
            76..=84 => (Command::QueryInfo, self.query_info(), 65536),
            85..=95 => (Command::SetInfo, self.set_info(), 0),
            96..=97 => (Command::OplockBreak, self.oplock_break(), 0),
            98 => (Command::TreeConnect, self.tree_connect(), 0),
            _ => (Command::Echo, vec![4, 0, 0, 0], 0),
        };
        if self.rng.gen_bool(0.3) {
            self.damage(&mut body);
        }
        (cmd, body, expect)
    }

    /// A compounded chain (MS-SMB2 3.2.4.1.4): mostly what Windows sends,
    /// a CREATE and requests on the file it opens (FileId all ones), often
    /// ending in its CLOSE; otherwise unrelated requests.
    pub fn compound(&mut self) -> (Vec<(Command, Vec<u8>)>, bool) {
        let related = self.rng.gen_bool(0.7);
        let mut msgs = Vec::new();
        if related {
            let create = if self.rng.gen_bool(0.5) {
                self.plain_open()
            } else {
                self.create()
            };
            msgs.push((Command::Create, create));
            self.force_id = Some([0xFF; 16]);
        }
        for _ in 0..self.rng.gen_range(1..4) {
            let (cmd, body) = match self.rng.gen_range(0..9) {
                0 => (Command::Read, self.read().0),
                1 => (Command::Write, self.write()),
                2 => (Command::QueryInfo, self.query_info()),
                3 => (Command::SetInfo, self.set_info()),
                4 => (Command::Ioctl, self.ioctl()),
                5 => (Command::QueryDirectory, self.query_directory()),
                6 => (Command::Lock, self.lock()),
                7 => (Command::Flush, self.flush()),
                _ => (Command::Close, self.close()),
            };
            msgs.push((cmd, body));
        }
        if related && self.rng.gen_bool(0.7) {
            msgs.push((Command::Close, self.close()));
        }
        self.force_id = None;
        for (_, body) in msgs.iter_mut() {
            if self.rng.gen_bool(0.2) {
                self.damage(body);
            }
        }
        (msgs, related)
    }

    pub fn note(&mut self, cmd: Command, body: &[u8], status: u32, msg: &Bytes) {
        if status != 0 {
            return;
        }
        match cmd {
            // MS-SMB2 2.2.14: the FileId of the open sits 64 bytes into the
            // CREATE response.
            Command::Create if msg.len() >= HDR + 80 => {
                let mut id = [0u8; 16];
                id.copy_from_slice(&msg[HDR + 64..HDR + 80]);
                self.open.push(id);
            }
            Command::Close if body.len() >= 24 => {
                let id: [u8; 16] = body[8..24].try_into().unwrap();
                self.open.retain(|o| *o != id);
                self.closed.push(id);
                if self.closed.len() > 32 {
                    self.closed.remove(0);
                }
            }
            _ => {}
        }
    }
}
