//! The verification trailer (MS-RPCE 2.2.2.13): what a client appends to
//! a request's stub so that the parts of the PDU a security provider does
//! not protect (the presentation context, the header) are covered by the
//! signature after all. Samba's and Windows' clients send one on requests
//! signed or sealed; servers check it and refuse the call on a mismatch.

use super::ndr::Endian;
use super::pdu::SyntaxId;

/// MS-RPCE 2.2.2.13.1 rpc_sec_verification_trailer.signature.
pub const SIGNATURE: [u8; 8] = [0x8a, 0xe3, 0x13, 0x71, 0x02, 0xf4, 0x36, 0x71];
/// How far from the end of the stub the signature is looked for (Samba
/// scans the last 1024 octets; a trailer is a few dozen).
const MAX_SEARCH: usize = 1024;
/// Octets a client may put after the trailer (Samba's tolerance).
const MAX_TRAILING: usize = 16;

/// MS-RPCE 2.2.2.13: the low 14 bits of `command` name it; the two high
/// ones mark the last command and one that must be understood.
pub mod command {
    pub const BITMASK_1: u16 = 0x0001;
    pub const PCONTEXT: u16 = 0x0002;
    pub const HEADER2: u16 = 0x0003;
    pub const ENUM_MASK: u16 = 0x3FFF;
    pub const END: u16 = 0x4000;
    pub const MUST_PROCESS: u16 = 0x8000;
}

/// MS-RPCE 2.2.2.13.2: bitmask_1's one defined bit.
pub const CLIENT_SUPPORTS_HEADER_SIGNING: u32 = 0x0000_0001;

/// MS-RPCE 2.2.2.13.3 rpc_sec_vt_header2: the request header as the
/// client sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header2 {
    pub ptype: u8,
    pub drep: [u8; 4],
    pub call_id: u32,
    pub context_id: u16,
    pub opnum: u16,
}

/// One command of the trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// MS-RPCE 2.2.2.13.2 rpc_sec_vt_bitmask.
    Bitmask1(u32),
    /// MS-RPCE 2.2.2.13.4 rpc_sec_vt_pcontext: the presentation context's
    /// abstract and transfer syntaxes.
    Pcontext {
        abstract_syntax: SyntaxId,
        transfer_syntax: SyntaxId,
    },
    Header2(Header2),
    /// A command this end does not know, with its raw value.
    Unknown {
        command: u16,
        value: Vec<u8>,
    },
}

/// A parsed trailer: each command with its flag bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerificationTrailer {
    /// (command word as sent, command).
    pub commands: Vec<(u16, Command)>,
}

/// What the server knows that the trailer claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// Whether the bind asked for header signing (PFC_SUPPORT_HEADER_SIGN).
    pub client_header_signing: bool,
    pub abstract_syntax: SyntaxId,
    pub transfer_syntax: SyntaxId,
    pub header2: Header2,
}

fn u16_in(b: &[u8], endian: Endian) -> u16 {
    match endian {
        Endian::Little => u16::from_le_bytes([b[0], b[1]]),
        Endian::Big => u16::from_be_bytes([b[0], b[1]]),
    }
}

fn u32_in(b: &[u8], endian: Endian) -> u32 {
    let b = [b[0], b[1], b[2], b[3]];
    match endian {
        Endian::Little => u32::from_le_bytes(b),
        Endian::Big => u32::from_be_bytes(b),
    }
}

impl VerificationTrailer {
    /// The commands after the signature, or None when they do not parse
    /// (each one's length must hold it, a known command's exactly).
    fn decode_commands(mut buf: &[u8], endian: Endian) -> Option<(Self, usize)> {
        let mut commands = Vec::new();
        loop {
            let word = u16_in(buf.get(..2)?, endian);
            let len = usize::from(u16_in(buf.get(2..4)?, endian));
            let value = buf.get(4..4 + len)?;
            let cmd = match word & command::ENUM_MASK {
                command::BITMASK_1 if len == 4 => Command::Bitmask1(u32_in(value, endian)),
                command::PCONTEXT if len == 40 => Command::Pcontext {
                    abstract_syntax: SyntaxId::decode_in(&value[..20], endian).ok()?,
                    transfer_syntax: SyntaxId::decode_in(&value[20..], endian).ok()?,
                },
                command::HEADER2 if len == 16 => Command::Header2(Header2 {
                    ptype: value[0],
                    drep: value[4..8].try_into().expect("4 octets"),
                    call_id: u32_in(&value[8..12], endian),
                    context_id: u16_in(&value[12..14], endian),
                    opnum: u16_in(&value[14..16], endian),
                }),
                command::BITMASK_1 | command::PCONTEXT | command::HEADER2 => return None,
                _ => Command::Unknown {
                    command: word,
                    value: value.to_vec(),
                },
            };
            commands.push((word, cmd));
            buf = &buf[4 + len..];
            if word & command::END != 0 {
                return Some((VerificationTrailer { commands }, buf.len()));
            }
        }
    }

    /// Little-endian, signature first (what a client appends to its stub,
    /// after aligning it to 4).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&SIGNATURE);
        for (word, cmd) in &self.commands {
            out.extend_from_slice(&word.to_le_bytes());
            let mut value = Vec::new();
            match cmd {
                Command::Bitmask1(bits) => value.extend_from_slice(&bits.to_le_bytes()),
                Command::Pcontext {
                    abstract_syntax,
                    transfer_syntax,
                } => {
                    for s in [abstract_syntax, transfer_syntax] {
                        value.extend_from_slice(&s.uuid);
                        value.extend_from_slice(&s.version.to_le_bytes());
                    }
                }
                Command::Header2(h) => {
                    value.extend_from_slice(&[h.ptype, 0, 0, 0]);
                    value.extend_from_slice(&h.drep);
                    value.extend_from_slice(&h.call_id.to_le_bytes());
                    value.extend_from_slice(&h.context_id.to_le_bytes());
                    value.extend_from_slice(&h.opnum.to_le_bytes());
                }
                Command::Unknown { value: v, .. } => value.extend_from_slice(v),
            }
            out.extend_from_slice(&(value.len() as u16).to_le_bytes());
            out.extend_from_slice(&value);
        }
    }

    /// MS-RPCE 3.3.1.5.7 (as Samba's dcerpc_sec_verification_trailer_check
    /// applies it): each command at most once; the pcontext and header2
    /// must match what the call arrived on; header signing may only be
    /// claimed if the bind asked for it; an unknown command marked
    /// must-process fails the check.
    pub fn check(&self, expected: &Expected) -> bool {
        let mut seen = Vec::new();
        for (word, cmd) in &self.commands {
            let id = word & command::ENUM_MASK;
            if seen.contains(&id) {
                return false;
            }
            seen.push(id);
            let ok = match cmd {
                Command::Bitmask1(bits) => {
                    bits & CLIENT_SUPPORTS_HEADER_SIGNING == 0 || expected.client_header_signing
                }
                Command::Pcontext {
                    abstract_syntax,
                    transfer_syntax,
                } => {
                    *abstract_syntax == expected.abstract_syntax
                        && *transfer_syntax == expected.transfer_syntax
                }
                Command::Header2(h) => *h == expected.header2,
                Command::Unknown { value, .. } => {
                    word & command::MUST_PROCESS == 0 && value.len() % 4 == 0
                }
            };
            if !ok {
                return false;
            }
        }
        true
    }
}

/// MS-RPCE 2.2.2.13: a server "SHOULD search for a sequence of octets that
/// matches the value of the signature" after the stub data. The signature
/// sits 4-aligned from the start of the stub; the last one that starts a
/// well-formed trailer, with at most 16 octets after it, is taken (as
/// Samba's ndr_pop_dcerpc_sec_verification_trailer does). Returns the stub
/// without the trailer, and the trailer; a stub without one comes back whole.
pub fn pop(stub: &[u8], endian: Endian) -> (&[u8], Option<VerificationTrailer>) {
    if stub.len() < SIGNATURE.len() {
        return (stub, None);
    }
    let last = (stub.len() - SIGNATURE.len()) & !3;
    let first = last.saturating_sub(MAX_SEARCH);
    let mut at = last;
    loop {
        if stub[at..at + SIGNATURE.len()] == SIGNATURE {
            // A signature that starts nothing well-formed is stub data.
            let rest = &stub[at + SIGNATURE.len()..];
            return match VerificationTrailer::decode_commands(rest, endian) {
                Some((vt, trailing)) if trailing <= MAX_TRAILING => (&stub[..at], Some(vt)),
                _ => (stub, None),
            };
        }
        if at <= first {
            return (stub, None);
        }
        at -= 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn samba_like(header2: Option<Header2>) -> VerificationTrailer {
        let mut commands = vec![
            (command::BITMASK_1, Command::Bitmask1(1)),
            (
                command::PCONTEXT,
                Command::Pcontext {
                    abstract_syntax: SyntaxId::LSARPC,
                    transfer_syntax: SyntaxId::NDR20,
                },
            ),
        ];
        if let Some(h) = header2 {
            commands.push((command::HEADER2, Command::Header2(h)));
        }
        commands.last_mut().unwrap().0 |= command::END;
        VerificationTrailer { commands }
    }

    fn header2() -> Header2 {
        Header2 {
            ptype: 0,
            drep: [0x10, 0, 0, 0],
            call_id: 3,
            context_id: 0,
            opnum: 44,
        }
    }

    fn expected() -> Expected {
        Expected {
            client_header_signing: true,
            abstract_syntax: SyntaxId::LSARPC,
            transfer_syntax: SyntaxId::NDR20,
            header2: header2(),
        }
    }

    fn stub_with(vt: &VerificationTrailer, stub_len: usize) -> Vec<u8> {
        let mut stub = vec![0x5A; stub_len];
        while !stub.len().is_multiple_of(4) {
            stub.push(0);
        }
        vt.encode(&mut stub);
        stub
    }

    #[test]
    fn pops_and_checks_what_samba_sends() {
        // The LsarOpenPolicy2 stub smbtorture rpc.bind sends, with its trailer.
        let vt = samba_like(None);
        let stub = stub_with(&vt, 0x36);
        let (body, found) = pop(&stub, Endian::Little);
        assert_eq!(body, [&[0x5A; 0x36][..], &[0, 0]].concat());
        assert_eq!(found.as_ref(), Some(&vt));
        assert!(vt.check(&expected()));
        let no_header_signing = Expected {
            client_header_signing: false,
            ..expected()
        };
        assert!(!vt.check(&no_header_signing));
    }

    #[test]
    fn header2_and_pcontext_must_match() {
        let vt = samba_like(Some(header2()));
        assert!(vt.check(&expected()));
        for e in [
            Expected {
                header2: Header2 {
                    opnum: 45,
                    ..header2()
                },
                ..expected()
            },
            Expected {
                abstract_syntax: SyntaxId::SRVSVC,
                ..expected()
            },
        ] {
            assert!(!vt.check(&e));
        }
        let twice = VerificationTrailer {
            commands: vec![
                (command::BITMASK_1, Command::Bitmask1(0)),
                (command::BITMASK_1 | command::END, Command::Bitmask1(0)),
            ],
        };
        assert!(!twice.check(&expected()));
        let must = VerificationTrailer {
            commands: vec![(
                0x0009 | command::END | command::MUST_PROCESS,
                Command::Unknown {
                    command: 0x0009 | command::END | command::MUST_PROCESS,
                    value: vec![0; 4],
                },
            )],
        };
        assert!(!must.check(&expected()));
    }

    #[test]
    fn big_endian_trailer_reads_the_same() {
        let h = header2();
        let mut stub = vec![0u8; 8];
        stub.extend_from_slice(&SIGNATURE);
        stub.extend_from_slice(&(command::HEADER2 | command::END).to_be_bytes());
        stub.extend_from_slice(&16u16.to_be_bytes());
        stub.extend_from_slice(&[h.ptype, 0, 0, 0]);
        stub.extend_from_slice(&h.drep);
        stub.extend_from_slice(&h.call_id.to_be_bytes());
        stub.extend_from_slice(&h.context_id.to_be_bytes());
        stub.extend_from_slice(&h.opnum.to_be_bytes());
        let (body, vt) = pop(&stub, Endian::Big);
        assert_eq!(body, [0u8; 8]);
        assert_eq!(
            vt.unwrap().commands,
            vec![(command::HEADER2 | command::END, Command::Header2(h))]
        );
    }

    #[test]
    fn stubs_without_a_trailer_stay_whole() {
        for stub in [&[][..], &[1, 2, 3], &[0; 64]] {
            assert_eq!(pop(stub, Endian::Little), (stub, None));
        }
        // The signature followed by garbage, or by too much, is stub data.
        let mut stub = SIGNATURE.to_vec();
        stub.extend_from_slice(&[0x01, 0x40, 0x08, 0x00, 1, 2, 3]);
        assert_eq!(pop(&stub, Endian::Little).1, None);
        let mut stub = stub_with(&samba_like(None), 4);
        stub.extend_from_slice(&[0; 20]);
        assert_eq!(pop(&stub, Endian::Little).1, None);
    }

    proptest! {
        #[test]
        fn round_trips(len in 0usize..64, bits in any::<u32>(), opnum in any::<u16>()) {
            let vt = VerificationTrailer {
                commands: vec![
                    (command::BITMASK_1, Command::Bitmask1(bits)),
                    (command::HEADER2 | command::END, Command::Header2(Header2 { opnum, ..header2() })),
                ],
            };
            let stub = stub_with(&vt, len);
            let (body, found) = pop(&stub, Endian::Little);
            prop_assert_eq!(body.len(), len.div_ceil(4) * 4);
            prop_assert_eq!(found, Some(vt));
        }

        #[test]
        fn pop_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), at in 0usize..200) {
            let mut bytes = bytes;
            let at = at.min(bytes.len()) & !3;
            if bytes.len() >= at + 8 {
                bytes[at..at + 8].copy_from_slice(&SIGNATURE);
            }
            let _ = pop(&bytes, Endian::Little);
            let _ = pop(&bytes, Endian::Big);
        }
    }
}
