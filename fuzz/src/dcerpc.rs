//! DCE/RPC over the srvsvc named pipe (`braid_smb_proto::dcerpc`): the first
//! byte picks whether a valid BIND goes first (bit 0) and the size of the
//! pieces the rest is written and read in (bits 1..7); the rest is what the
//! client writes. Properties: no panic; every answer read back is one whole
//! PDU (a read never spans two), that splits cleanly and, for a RESPONSE,
//! fits the negotiated fragment size.
use braid_smb_proto::dcerpc::pdu::{
    encode_pdu, pfc, ptype, split_fragment, Bind, ContextElement, SyntaxId,
};
use braid_smb_proto::dcerpc::{share_type, PipeEndpoint, ServerInfo, ShareEntry, SrvsvcBackend};

/// The fragment size the BIND below offers.
const MAX_FRAG: u16 = 1024;

struct Backend;

impl SrvsvcBackend for Backend {
    fn shares(&self) -> Vec<ShareEntry> {
        (0..40)
            .map(|i| ShareEntry {
                name: format!("share{i}"),
                share_type: if i == 0 {
                    share_type::IPC | share_type::SPECIAL
                } else {
                    share_type::DISK
                },
                comment: "x".repeat(i),
            })
            .collect()
    }
    fn server_info(&self) -> ServerInfo {
        ServerInfo {
            name: "BRAID".into(),
            comment: "fuzz".into(),
            version_major: 10,
            version_minor: 0,
            server_type: 0x8003,
        }
    }
}

fn bind() -> Vec<u8> {
    let mut body = Vec::new();
    Bind {
        max_xmit_frag: MAX_FRAG,
        max_recv_frag: MAX_FRAG,
        assoc_group_id: 0,
        contexts: vec![ContextElement {
            context_id: 0,
            abstract_syntax: SyntaxId::SRVSVC,
            transfer_syntaxes: vec![SyntaxId::NDR20],
        }],
    }
    .encode(&mut body);
    encode_pdu(ptype::BIND, pfc::FIRST_FRAG | pfc::LAST_FRAG, 1, &body)
}

/// Reads every pending answer in `piece`-byte reads and checks each PDU.
fn drain(ep: &mut PipeEndpoint, piece: usize, bound: bool) {
    let mut pdu = Vec::new();
    while ep.has_output() {
        let (bytes, more) = ep.read(piece);
        assert!(!bytes.is_empty() && bytes.len() <= piece);
        pdu.extend_from_slice(&bytes);
        if more {
            continue;
        }
        let frag = split_fragment(&pdu).expect("an answer that does not split");
        assert_eq!(
            frag.header.frag_length as usize,
            pdu.len(),
            "a read spanned two PDUs"
        );
        if bound && frag.header.ptype == ptype::RESPONSE {
            assert!(pdu.len() <= MAX_FRAG as usize);
        }
        pdu.clear();
    }
    assert!(pdu.is_empty(), "a PDU left half read");
}

/// The target: see the module comment.
pub fn dcerpc(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bound = mode & 1 != 0;
    let piece = 1 + usize::from(mode >> 1);
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    if bound {
        ep.write(&bind(), &Backend).unwrap();
        drain(&mut ep, piece, false);
    }
    for chunk in rest.chunks(piece) {
        let _ = ep.write(chunk, &Backend);
        drain(&mut ep, piece, bound);
    }
}

/// Seeds: a BIND then NetShareEnumAll at level 1, written unbound in
/// 1-byte pieces; and the same call alone, bound, in 64-byte pieces.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut stub = Vec::new();
    for v in [0u32, 1, 1, 0x0002_0000, 0, 0, u32::MAX, 0] {
        // server_unc NULL, level 1, switch 1, ctr1 pointer, count 0,
        // array NULL, PreferedMaximumLength, resume handle NULL
        stub.extend_from_slice(&v.to_le_bytes());
    }
    let mut body = Vec::new();
    body.extend_from_slice(&(stub.len() as u32).to_le_bytes()); // alloc_hint
    body.extend_from_slice(&0u16.to_le_bytes()); // context id
    body.extend_from_slice(&15u16.to_le_bytes()); // NetShareEnumAll
    body.extend_from_slice(&stub);
    let request = encode_pdu(ptype::REQUEST, pfc::FIRST_FRAG | pfc::LAST_FRAG, 2, &body);
    let mut unbound = vec![0u8];
    unbound.extend_from_slice(&bind());
    unbound.extend_from_slice(&request);
    let mut bound = vec![1u8 | (63 << 1)];
    bound.extend_from_slice(&request);
    vec![("bind-enum".into(), unbound), ("enum".into(), bound)]
}
