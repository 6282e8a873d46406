//! One open of a named pipe: the server side of a connection-oriented
//! DCE/RPC association (C706 chapter 12, MS-RPCE 3.3.3) over the bytes
//! SMB2 WRITE / FSCTL_PIPE_TRANSCEIVE carry, answers queued for READ.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};

use thiserror::Error;

use super::auth::{self, OutAuth, RpcAuthBackend, RpcSecurity};
use super::dssetup;
use super::lsa::{self, LsaBackend, LsaState};
use super::mgmt::{self, Stats};
use super::ndr::{Endian, Stub};
use super::pdu::{
    bind_nak_reason, context_result, encode_pdu, fault_status, pfc, provider_reason, ptype,
    split_fragment, Bind, BindAck, BindNak, CommonHeader, ContextElement, ContextResult, Fault,
    Fragment, PduError, Request, Response, SyntaxId, COMMON_HEADER_LEN, RESPONSE_HEADER_LEN,
};
use super::srvsvc::{self, SrvsvcBackend};
use super::vt;

/// The fragment size Windows and Samba use over SMB: the most this end
/// sends or accepts in one fragment.
pub const MAX_FRAG: u16 = 4280;
/// The least fragment size negotiated, whatever a client offers, so every
/// answer fragment carries a useful stub (C706's MustRecvFragSize is 1432;
/// real clients offer more).
pub const MIN_FRAG: u16 = 256;
/// A whole request's stub, its fragments together; srvsvc requests are
/// a few hundred bytes, lsarpc lookups of 1000 names some tens of KiB.
pub const MAX_REQUEST_STUB: usize = 64 * 1024;
/// Unread answers beyond which no further PDU is taken.
pub const MAX_PENDING_OUTPUT: usize = 1024 * 1024;
/// Presentation contexts one association may accept.
const MAX_CONTEXTS: usize = 256;
/// MS-RPCE 2.2.2.14: bind time features this server supports (none: it
/// neither multiplexes security contexts nor keeps orphaned connections).
const SUPPORTED_BIND_TIME_FEATURES: u8 = 0;

/// Association groups handed out to binds that ask for a new one.
static NEXT_ASSOC_GROUP_ID: AtomicU32 = AtomicU32::new(0x0001_2345);

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PipeError {
    #[error(transparent)]
    Pdu(#[from] PduError),
    #[error("frag_length {frag_length} exceeds {max}")]
    FragmentTooLarge { frag_length: u16, max: u16 },
    #[error("PDU type {0} is not one a client sends")]
    UnexpectedPdu(u8),
    #[error("request fragment out of sequence (call_id {0})")]
    FragmentSequence(u32),
    #[error("request stub larger than {MAX_REQUEST_STUB} bytes")]
    RequestTooLarge,
    #[error("more than {MAX_PENDING_OUTPUT} bytes of answers wait unread")]
    OutputBacklog,
    /// A protocol error (a context redefined) or a security failure ended
    /// the association, as Samba and Windows end it
    /// (dcesrv_fault_disconnect): the pipe takes no further PDU.
    #[error("the association was ended after a protocol or security failure")]
    Disconnected,
}

/// What a BIND established.
#[derive(Debug)]
struct Association {
    assoc_group_id: u32,
    /// Negotiated max_xmit_frag = max_recv_frag.
    max_frag: u16,
    /// Each accepted presentation context and the interface it carries.
    accepted_contexts: BTreeMap<u16, Interface>,
}

/// A request whose fragments are still arriving.
#[derive(Debug)]
struct PendingCall {
    call_id: u32,
    context_id: u16,
    opnum: u16,
    endian: Endian,
    stub: Vec<u8>,
    /// Fault status decided at the first fragment; the stub is then dropped.
    refusal: Option<u32>,
}

/// What the calls of the served pipes answer from: the server's state as
/// the caller sees it.
pub trait PipeBackend {
    fn srvsvc(&self) -> &dyn SrvsvcBackend;
    fn lsa(&self) -> &dyn LsaBackend;
    /// What authenticated binds are checked against; None refuses them.
    fn rpc_auth(&self) -> Option<&dyn RpcAuthBackend> {
        None
    }
}

/// An RPC interface a pipe may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interface {
    /// MS-SRVS: shares, sessions, open files.
    Srvsvc,
    /// MS-LSAT / MS-LSAD: SID and name lookups.
    Lsarpc,
    /// MS-DSSP: the server's role, on the lsarpc pipe.
    Dssetup,
    /// C706 appendix Q: remote management, on every pipe.
    Mgmt,
}

impl Interface {
    fn syntax(self) -> SyntaxId {
        match self {
            Interface::Srvsvc => SyntaxId::SRVSVC,
            Interface::Lsarpc => SyntaxId::LSARPC,
            Interface::Dssetup => SyntaxId::DSSETUP,
            Interface::Mgmt => SyntaxId::MGMT,
        }
    }
}

/// What a pipe serves.
#[derive(Debug)]
enum PipeService {
    Srvsvc,
    /// With the policy handles this open holds.
    Lsarpc(LsaState),
}

impl PipeService {
    /// `pipe_name` lowercase, without "\\pipe\\". Windows serves lsarpc
    /// on \\PIPE\\lsass too, and clients open either.
    fn of(pipe_name: &str) -> Option<PipeService> {
        match pipe_name.to_ascii_lowercase().as_str() {
            "srvsvc" => Some(PipeService::Srvsvc),
            "lsarpc" | "lsass" => Some(PipeService::Lsarpc(LsaState::default())),
            _ => None,
        }
    }

    /// The interfaces a client may bind on this pipe, its own first (as
    /// Windows lists them for rpc_mgmt_inq_if_ids).
    fn interfaces(&self) -> &'static [Interface] {
        match self {
            PipeService::Srvsvc => &[Interface::Srvsvc, Interface::Mgmt],
            PipeService::Lsarpc(_) => &[Interface::Lsarpc, Interface::Dssetup, Interface::Mgmt],
        }
    }

    /// C706 12.6.4.4 sec_addr: the endpoint the association reached.
    fn secondary_address(&self) -> &'static [u8] {
        match self {
            PipeService::Srvsvc => b"\\PIPE\\srvsvc",
            PipeService::Lsarpc(_) => b"\\PIPE\\lsass",
        }
    }

    fn call(
        &mut self,
        interface: Interface,
        opnum: u16,
        stub: Stub<'_>,
        backend: &dyn PipeBackend,
        stats: Stats,
    ) -> Result<Vec<u8>, u32> {
        match (interface, self) {
            (Interface::Srvsvc, _) => srvsvc::handle_stub(opnum, stub, backend.srvsvc()),
            (Interface::Lsarpc, PipeService::Lsarpc(state)) => {
                lsa::handle_stub(opnum, stub, backend.lsa(), state)
            }
            (Interface::Dssetup, _) => dssetup::handle_call(opnum, stub, backend.lsa()),
            (Interface::Mgmt, service) => {
                let served: Vec<SyntaxId> =
                    service.interfaces().iter().map(|i| i.syntax()).collect();
                mgmt::handle_call(opnum, stub, &served, stats)
            }
            // Contexts are only accepted for the pipe's own interfaces.
            (Interface::Lsarpc, PipeService::Srvsvc) => Err(fault_status::NCA_UNK_IF),
        }
    }
}

/// The state of one open of a named pipe: bytes written by the client go in,
/// complete PDUs are answered, answers wait to be read.
#[derive(Debug)]
pub struct PipeEndpoint {
    service: PipeService,
    input: Vec<u8>,
    association: Option<Association>,
    /// The bind's security context, if it asked for one (`auth.rs`).
    security: RpcSecurity,
    pending: Option<PendingCall>,
    /// One PDU per entry: a message of the message-mode pipe.
    output: VecDeque<Vec<u8>>,
    /// Bytes of `output.front()` already read.
    output_read: usize,
    output_bytes: usize,
    /// Counted for rpc_mgmt_inq_stats.
    stats: Stats,
    /// Set by a protocol error that ends the association (MS-RPCE
    /// 3.3.1.5.1): nothing more is taken, what was answered can be read.
    disconnected: bool,
}

impl PipeEndpoint {
    /// `pipe_name` as the client opened it, without "\\pipe\\" (e.g.
    /// "srvsvc", "lsarpc"). None for pipes not served.
    pub fn open(pipe_name: &str) -> Option<PipeEndpoint> {
        PipeService::of(pipe_name).map(|service| PipeEndpoint {
            service,
            input: Vec::new(),
            association: None,
            security: RpcSecurity::default(),
            pending: None,
            output: VecDeque::new(),
            output_read: 0,
            output_bytes: 0,
            stats: Stats::default(),
            disconnected: false,
        })
    }

    /// Bytes the client wrote: part of a PDU, one, or several. On Err the
    /// half-received PDU, any half-received request and the rest of `data`
    /// are dropped (the stream cannot be resynchronised), so the next write
    /// must start a PDU; bound contexts and unread answers stay.
    pub fn write(&mut self, data: &[u8], backend: &dyn PipeBackend) -> Result<(), PipeError> {
        let result = self.consume(data, backend);
        if result.is_err() {
            self.input.clear();
            self.pending = None;
        }
        result
    }

    /// Up to `max` bytes of the pending answer, never from two PDUs; the
    /// bool is true when this PDU has bytes left after them.
    pub fn read(&mut self, max: usize) -> (Vec<u8>, bool) {
        let Some(front) = self.output.front() else {
            return (Vec::new(), false);
        };
        let rest = &front[self.output_read..];
        let taken = rest[..rest.len().min(max)].to_vec();
        self.output_read += taken.len();
        if self.output_read < front.len() {
            return (taken, true);
        }
        self.output_bytes -= front.len();
        self.output_read = 0;
        self.output.pop_front();
        (taken, false)
    }

    /// Whether anything waits to be read.
    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Whether a protocol or security failure ended the association
    /// (MS-RPCE 3.3.1.5.1): no PDU is taken any more, so once what was
    /// answered is read, nothing more will ever be.
    pub fn is_disconnected(&self) -> bool {
        self.disconnected || self.security.terminated()
    }

    fn consume(&mut self, mut data: &[u8], backend: &dyn PipeBackend) -> Result<(), PipeError> {
        while !data.is_empty() {
            if self.input.len() < COMMON_HEADER_LEN {
                let take = (COMMON_HEADER_LEN - self.input.len()).min(data.len());
                self.input.extend_from_slice(&data[..take]);
                data = &data[take..];
                if self.input.len() < COMMON_HEADER_LEN {
                    break;
                }
            }
            let header = CommonHeader::decode(&self.input)?;
            Self::check_frag_length(&header)?;
            let frag_len = header.frag_length as usize;
            let take = (frag_len - self.input.len()).min(data.len());
            self.input.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.input.len() == frag_len {
                let pdu = std::mem::take(&mut self.input);
                self.process(&pdu, backend)?;
            }
        }
        Ok(())
    }

    /// Input is capped before it is buffered. Binds and alter contexts may
    /// use the whole u16 range (many offered contexts make them large), so
    /// at most 64 KiB waits; other PDUs are held, like Samba does, to the
    /// transport's 4280 rather than the negotiated size, which a client
    /// that overshoots it a little then survives.
    fn check_frag_length(header: &CommonHeader) -> Result<(), PipeError> {
        let frag_length = header.frag_length;
        if (frag_length as usize) < COMMON_HEADER_LEN {
            return Err(PduError::FragLength(frag_length).into());
        }
        let max = match header.ptype {
            ptype::BIND | ptype::ALTER_CONTEXT => u16::MAX,
            _ => MAX_FRAG,
        };
        if frag_length > max {
            return Err(PipeError::FragmentTooLarge { frag_length, max });
        }
        Ok(())
    }

    fn process(&mut self, pdu: &[u8], backend: &dyn PipeBackend) -> Result<(), PipeError> {
        if self.output_bytes >= MAX_PENDING_OUTPUT {
            return Err(PipeError::OutputBacklog);
        }
        if self.disconnected || self.security.terminated() {
            return Err(PipeError::Disconnected);
        }
        let frag = split_fragment(pdu)?;
        self.stats.pkts_in = self.stats.pkts_in.wrapping_add(1);
        match frag.header.ptype {
            ptype::BIND => self.bind(&frag, backend),
            ptype::ALTER_CONTEXT => self.alter_context(&frag, backend),
            ptype::AUTH3 => self.auth3(&frag, backend),
            ptype::REQUEST => self.request(pdu, &frag, backend),
            // Cancel and orphaned notices need no answer, and no call here
            // runs long enough to be interrupted (Samba ignores them too).
            ptype::CO_CANCEL | ptype::ORPHANED => Ok(()),
            other => Err(PipeError::UnexpectedPdu(other)),
        }
    }

    /// C706 12.6.4.3 bind -> 12.6.4.4 bind_ack or 12.6.4.5 bind_nak.
    fn bind(&mut self, frag: &Fragment<'_>, backend: &dyn PipeBackend) -> Result<(), PipeError> {
        let call_id = frag.header.call_id;
        // One bind per connection, as Samba and Windows hold it; a client
        // adds contexts with alter_context.
        if self.association.is_some() {
            self.push_bind_nak(call_id, bind_nak_reason::NOT_SPECIFIED);
            return Ok(());
        }
        let bind = Bind::decode_in(frag.body, frag.header.endian)?;
        if bind.contexts.is_empty() {
            self.push_bind_nak(call_id, bind_nak_reason::PROTOCOL_VERSION_NOT_SUPPORTED);
            return Ok(());
        }
        let mut accepted_contexts = BTreeMap::new();
        let served = self.service.interfaces();
        let Ok(results) = negotiate_contexts(&bind.contexts, served, &mut accepted_contexts) else {
            self.push_bind_nak(call_id, bind_nak_reason::NOT_SPECIFIED);
            return Ok(());
        };
        // MS-RPCE 3.3.1.5.2: the security context's first leg, once the
        // contexts are known to be acceptable (Samba's order).
        let auth = match self.security.bind(frag, backend.rpc_auth()) {
            Ok(auth) => auth,
            Err(reason) => {
                self.push_bind_nak(call_id, reason);
                return Ok(());
            }
        };
        let max_frag = negotiate_frag(bind.max_xmit_frag, bind.max_recv_frag);
        let assoc_group_id = match bind.assoc_group_id {
            0 => NEXT_ASSOC_GROUP_ID.fetch_add(1, Ordering::Relaxed).max(1),
            joined => joined,
        };
        self.association = Some(Association {
            assoc_group_id,
            max_frag,
            accepted_contexts,
        });
        let ack = BindAck {
            max_xmit_frag: max_frag,
            max_recv_frag: max_frag,
            assoc_group_id,
            secondary_address: self.service.secondary_address().to_vec(),
            results,
        };
        let flags = self.header_sign_flag(frag);
        self.push_ack(ptype::BIND_ACK, flags, call_id, &ack, auth.as_ref());
        Ok(())
    }

    /// MS-RPCE 3.3.1.5.2.2: header signing is offered back to a client
    /// that asked for it in an authenticated bind, as Samba and Windows
    /// do (NTLMSSP signs the whole PDU, header included, regardless).
    fn header_sign_flag(&self, frag: &Fragment<'_>) -> u8 {
        if self.security.client_header_signing()
            && frag.header.pfc_flags & auth::PFC_SUPPORT_HEADER_SIGN != 0
            && frag.header.auth_length != 0
        {
            auth::PFC_SUPPORT_HEADER_SIGN
        } else {
            0
        }
    }

    /// MS-RPCE 2.2.2.10 rpc_auth_3: the last NTLMSSP leg, unanswered
    /// unless it is malformed.
    fn auth3(&mut self, frag: &Fragment<'_>, backend: &dyn PipeBackend) -> Result<(), PipeError> {
        if let Err(status) = self.security.auth3(frag, backend.rpc_auth()) {
            self.push_fault(frag.header.call_id, 0, status, pfc::DID_NOT_EXECUTE);
        }
        Ok(())
    }

    /// C706 12.6.4.1 alter_context -> 12.6.4.2 alter_context_resp.
    fn alter_context(
        &mut self,
        frag: &Fragment<'_>,
        backend: &dyn PipeBackend,
    ) -> Result<(), PipeError> {
        let call_id = frag.header.call_id;
        let alter = Bind::decode_in(frag.body, frag.header.endian)?;
        let served = self.service.interfaces();
        // MS-RPCE 3.3.1.5.2: a further leg of the bind's security context.
        let auth = match self.association {
            Some(_) => self.security.alter(frag, backend.rpc_auth()),
            None => Err(fault_status::NCA_PROTO_ERROR),
        };
        let flags = self.header_sign_flag(frag);
        let outcome = match (self.association.as_mut(), auth) {
            (None, _) => Err(Refusal::Fault(fault_status::NCA_PROTO_ERROR)),
            (Some(_), Err(status)) => Err(Refusal::Fault(status)),
            (Some(_), Ok(_)) if alter.contexts.is_empty() => {
                Err(Refusal::Fault(fault_status::NCA_PROTO_ERROR))
            }
            (Some(assoc), Ok(auth)) => {
                negotiate_contexts(&alter.contexts, served, &mut assoc.accepted_contexts).map(
                    |results| {
                        let ack = BindAck {
                            max_xmit_frag: assoc.max_frag,
                            max_recv_frag: assoc.max_frag,
                            assoc_group_id: assoc.assoc_group_id,
                            secondary_address: Vec::new(),
                            results,
                        };
                        (ack, auth)
                    },
                )
            }
        };
        let protocol_error = fault_status::NCA_PROTO_ERROR;
        match outcome {
            Ok((ack, auth)) => {
                self.push_ack(
                    ptype::ALTER_CONTEXT_RESP,
                    flags,
                    call_id,
                    &ack,
                    auth.as_ref(),
                );
            }
            Err(Refusal::Fault(status)) => {
                self.push_fault(call_id, 0, status, pfc::DID_NOT_EXECUTE)
            }
            Err(Refusal::Malformed) => {
                self.push_fault(call_id, 0, protocol_error, pfc::DID_NOT_EXECUTE)
            }
            // MS-RPCE 3.3.1.5.1: a protocol error ends the association;
            // the client reads the fault, and its next PDU finds the pipe
            // disconnected, as on Samba.
            Err(Refusal::ContextRedefined) => {
                self.push_fault(call_id, 0, protocol_error, pfc::DID_NOT_EXECUTE);
                self.disconnected = true;
            }
        }
        Ok(())
    }

    /// C706 12.6.4.9 request: fragments gathered until LAST_FRAG, then the
    /// call is answered by response fragments or a fault.
    fn request(
        &mut self,
        pdu: &[u8],
        frag: &Fragment<'_>,
        backend: &dyn PipeBackend,
    ) -> Result<(), PipeError> {
        let header = frag.header;
        let req = Request::decode_in(frag.body, header.pfc_flags, header.endian)?;
        let first = header.pfc_flags & pfc::FIRST_FRAG != 0;
        let mut call = match self.pending.take() {
            None if first => PendingCall {
                call_id: header.call_id,
                context_id: req.context_id,
                opnum: req.opnum,
                endian: header.endian,
                stub: Vec::new(),
                refusal: self.refusal(req.context_id),
            },
            Some(call) if !first && call.call_id == header.call_id => call,
            _ => return Err(PipeError::FragmentSequence(header.call_id)),
        };
        // MS-RPCE 3.3.1.5.2.2: each fragment is verified (and unsealed) by
        // itself, in order, so that the sequence numbers stay in step; a
        // failure ends the association (`auth.rs`).
        let stub = match self.security.open_request(pdu, frag) {
            Ok(stub) => stub,
            Err(status) => {
                self.push_fault(call.call_id, call.context_id, status, 0);
                return Ok(());
            }
        };
        if call.refusal.is_none() {
            if call.stub.len() + stub.len() > MAX_REQUEST_STUB {
                return Err(PipeError::RequestTooLarge);
            }
            call.stub.extend_from_slice(&stub);
        }
        if header.pfc_flags & pfc::LAST_FRAG == 0 {
            self.pending = Some(call);
            return Ok(());
        }
        self.stats.calls_in = self.stats.calls_in.wrapping_add(1);
        if let Some(status) = call.refusal {
            self.push_fault(call.call_id, call.context_id, status, pfc::DID_NOT_EXECUTE);
            return Ok(());
        }
        let interface = self
            .association
            .as_ref()
            .and_then(|assoc| assoc.accepted_contexts.get(&call.context_id).copied());
        let Some(interface) = interface else {
            let status = fault_status::NCA_UNK_IF;
            self.push_fault(call.call_id, call.context_id, status, pfc::DID_NOT_EXECUTE);
            return Ok(());
        };
        // MS-RPCE 2.2.2.13: a verification trailer ends the stub; what it
        // claims (the context's own interface among it) must be what the
        // call came with (Samba: ACCESS_DENIED).
        let (stub, trailer) = vt::pop(&call.stub, call.endian);
        if trailer.is_some_and(|t| !t.check(&self.expected_trailer(&call, interface))) {
            self.push_fault(
                call.call_id,
                call.context_id,
                fault_status::ACCESS_DENIED,
                0,
            );
            return Ok(());
        }
        let stub = Stub::new(stub, call.endian);
        let stats = self.stats;
        match self
            .service
            .call(interface, call.opnum, stub, backend, stats)
        {
            Ok(stub) => self.push_response(call.call_id, call.context_id, &stub),
            Err(status) => {
                // Calls refused before they run: an unknown operation, a
                // policy handle this pipe never gave, a lookup that needs
                // a secure channel.
                let refused = [
                    fault_status::NCA_OP_RNG_ERROR,
                    lsa::FAULT_CONTEXT_MISMATCH,
                    fault_status::ACCESS_DENIED,
                ];
                let flags = if refused.contains(&status) {
                    pfc::DID_NOT_EXECUTE
                } else {
                    0
                };
                self.push_fault(call.call_id, call.context_id, status, flags);
            }
        }
        Ok(())
    }

    /// What a verification trailer must say about `call`.
    fn expected_trailer(&self, call: &PendingCall, interface: Interface) -> vt::Expected {
        vt::Expected {
            client_header_signing: self.security.client_header_signing(),
            abstract_syntax: interface.syntax(),
            transfer_syntax: SyntaxId::NDR20,
            header2: vt::Header2 {
                ptype: ptype::REQUEST,
                drep: match call.endian {
                    Endian::Little => super::pdu::DREP_LITTLE_ENDIAN,
                    Endian::Big => super::pdu::DREP_BIG_ENDIAN,
                },
                call_id: call.call_id,
                context_id: call.context_id,
                opnum: call.opnum,
            },
        }
    }

    /// Why a call cannot run, decided from its first fragment.
    fn refusal(&self, context_id: u16) -> Option<u32> {
        match &self.association {
            None => Some(fault_status::NCA_UNK_IF),
            Some(assoc) if !assoc.accepted_contexts.contains_key(&context_id) => {
                Some(fault_status::NCA_UNK_IF)
            }
            Some(_) => None,
        }
    }

    fn push(&mut self, pdu: Vec<u8>) {
        self.stats.pkts_out = self.stats.pkts_out.wrapping_add(1);
        self.output_bytes += pdu.len();
        self.output.push_back(pdu);
    }

    fn push_ack(
        &mut self,
        ptype: u8,
        extra_flags: u8,
        call_id: u32,
        ack: &BindAck,
        auth: Option<&OutAuth>,
    ) {
        let mut body = Vec::new();
        ack.encode(&mut body);
        let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG | extra_flags;
        self.push(auth::encode_pdu_with_auth(
            ptype, flags, call_id, &body, auth,
        ));
    }

    fn push_bind_nak(&mut self, call_id: u32, reject_reason: u16) {
        let mut body = Vec::new();
        BindNak {
            reject_reason,
            versions: vec![(5, 0)],
        }
        .encode(&mut body);
        self.push(encode_pdu(
            ptype::BIND_NAK,
            pfc::FIRST_FRAG | pfc::LAST_FRAG,
            call_id,
            &body,
        ));
    }

    /// MS-RPCE 2.2.2.8: no stub; alloc_hint 0x20 (the PDU's own length)
    /// tells the client no extended error information follows.
    fn push_fault(&mut self, call_id: u32, context_id: u16, status: u32, extra_flags: u8) {
        let mut body = Vec::new();
        Fault {
            alloc_hint: (COMMON_HEADER_LEN + Fault::BODY_LEN) as u32,
            context_id,
            cancel_count: 0,
            flags: 0,
            status,
        }
        .encode(&mut body);
        let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG | extra_flags;
        self.push(encode_pdu(ptype::FAULT, flags, call_id, &body));
    }

    /// C706 12.6.4.10 / MS-RPCE 2.2.2.6: the stub cut so each fragment fits
    /// max_xmit_frag, alloc_hint counting the stub left from this fragment.
    fn push_response(&mut self, call_id: u32, context_id: u16, stub: &[u8]) {
        let max_frag = self.association.as_ref().map_or(MAX_FRAG, |a| a.max_frag);
        let per_fragment = self.security.stub_per_fragment(max_frag);
        let mut offset = 0;
        loop {
            let end = (offset + per_fragment).min(stub.len());
            let mut flags = 0;
            if offset == 0 {
                flags |= pfc::FIRST_FRAG;
            }
            if end == stub.len() {
                flags |= pfc::LAST_FRAG;
            }
            let mut body = Vec::with_capacity(RESPONSE_HEADER_LEN + end - offset);
            Response {
                alloc_hint: (stub.len() - offset) as u32,
                context_id,
                cancel_count: 0,
                stub: stub[offset..end].to_vec(),
            }
            .encode(&mut body);
            // Signed and sealed fragment by fragment (MS-RPCE 2.2.2.11).
            let pdu = self.security.response_pdu(flags, call_id, &body);
            self.push(pdu);
            offset = end;
            if offset == stub.len() {
                return;
            }
        }
    }
}

/// C706 12.6.4.3: a client's max_recv_frag bounds what this end sends and
/// its max_xmit_frag what it will send; like Windows and Samba, one value
/// answers both, a multiple of 8 so every fragment's stub stays 8-aligned.
fn negotiate_frag(client_xmit: u16, client_recv: u16) -> u16 {
    client_xmit.min(client_recv).clamp(MIN_FRAG, MAX_FRAG) & !7
}

/// Why a bind or alter_context offer gets no acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// A context without transfer syntaxes, or two feature negotiation
    /// contexts: a bind_nak, or a fault for an alter_context.
    Malformed,
    /// A context id already accepted, offered again with another abstract
    /// or transfer syntax (Samba ends the association, as C706 12.6.4.1
    /// leaves a context's syntax fixed for its life).
    ContextRedefined,
    /// An alter_context refused before its contexts are looked at.
    Fault(u32),
}

/// C706 12.6.3.1 / MS-RPCE 3.3.1.5.3: one result per offered context, in
/// order, accepting the interfaces the pipe serves (`served`) and
/// recording each accepted context's interface in `accepted`.
fn negotiate_contexts(
    offered: &[ContextElement],
    served: &[Interface],
    accepted: &mut BTreeMap<u16, Interface>,
) -> Result<Vec<ContextResult>, Refusal> {
    let mut feature_contexts = 0;
    for ctx in offered {
        let first = ctx.transfer_syntaxes.first().ok_or(Refusal::Malformed)?;
        if first.bind_time_features().is_some() {
            feature_contexts += 1;
        }
    }
    if feature_contexts > 1 {
        return Err(Refusal::Malformed);
    }
    let rejection = |reason| ContextResult {
        result: context_result::PROVIDER_REJECTION,
        reason,
        transfer_syntax: SyntaxId::NULL,
    };
    let mut results = Vec::with_capacity(offered.len());
    for ctx in offered {
        // Only the first transfer syntax marks a feature negotiation
        // context; the answer's reason is the features both support.
        if let Some(features) = ctx.transfer_syntaxes[0].bind_time_features() {
            results.push(ContextResult {
                result: context_result::NEGOTIATE_ACK,
                reason: u16::from(features & SUPPORTED_BIND_TIME_FEATURES),
                transfer_syntax: SyntaxId::NULL,
            });
            continue;
        }
        let Some(&interface) = served.iter().find(|i| i.syntax() == ctx.abstract_syntax) else {
            results.push(rejection(provider_reason::ABSTRACT_SYNTAX_NOT_SUPPORTED));
            continue;
        };
        let ndr20 = ctx.transfer_syntaxes.contains(&SyntaxId::NDR20);
        match accepted.get(&ctx.context_id) {
            Some(&bound) if bound != interface => return Err(Refusal::ContextRedefined),
            Some(_) if !ndr20 => return Err(Refusal::ContextRedefined),
            Some(_) => {}
            None if !ndr20 => {
                results.push(rejection(provider_reason::TRANSFER_SYNTAXES_NOT_SUPPORTED));
                continue;
            }
            None if accepted.len() >= MAX_CONTEXTS => {
                results.push(rejection(provider_reason::LOCAL_LIMIT_EXCEEDED));
                continue;
            }
            None => {
                accepted.insert(ctx.context_id, interface);
            }
        }
        results.push(ContextResult {
            result: context_result::ACCEPTANCE,
            reason: provider_reason::NOT_SPECIFIED,
            transfer_syntax: SyntaxId::NDR20,
        });
    }
    Ok(results)
}
