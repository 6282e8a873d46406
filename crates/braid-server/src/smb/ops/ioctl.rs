//! IOCTL: MS-SMB2 3.3.5.15.

use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::messages::ioctl::{
    encode_network_interface_info, fsctl, NetworkInterfaceInfo, ValidateNegotiateInfoRequest,
    ValidateNegotiateInfoResponse,
};
use braid_smb_proto::messages::{IoctlRequest, IoctlResponse};
use braid_smb_proto::NtStatus;

use super::{fsctl_copy, fsctl_dup_extents, fsctl_snapshots, fsctl_sparse};
use crate::smb::{OpResult, Reply, Request};

/// SMB2_0_IOCTL_IS_FSCTL.
const IS_FSCTL: u32 = 0x0000_0001;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = IoctlRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if r.flags != IS_FSCTL {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let max = req.conn.config.max_transact_size;
    if r.input.len() as u32 > max || r.max_output_response > max || r.max_input_response > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let output = match r.ctl_code {
        fsctl::VALIDATE_NEGOTIATE_INFO => validate_negotiate(req, &r)?,
        fsctl::DFS_GET_REFERRALS | fsctl::DFS_GET_REFERRALS_EX => return Err(NtStatus::NOT_FOUND),
        fsctl::PIPE_TRANSCEIVE if super::pipe::on_ipc(req) => {
            return super::pipe::transceive(req, &r)
        }
        fsctl::PIPE_TRANSCEIVE => return Err(NtStatus::NOT_SUPPORTED),
        fsctl::QUERY_NETWORK_INTERFACE_INFO => network_interface_info(req, &r)?,
        FSCTL_CREATE_OR_GET_OBJECT_ID | FSCTL_GET_OBJECT_ID => object_id(req, &r).await?,
        fsctl::SRV_ENUMERATE_SNAPSHOTS => fsctl_snapshots::enumerate(req, &r).await?,
        fsctl::SRV_REQUEST_RESUME_KEY => fsctl_copy::request_resume_key(req, &r)?,
        fsctl::SET_SPARSE => fsctl_sparse::set_sparse(req, &r).await?,
        fsctl::SET_ZERO_DATA => fsctl_sparse::set_zero_data(req, &r).await?,
        fsctl::QUERY_ALLOCATED_RANGES => fsctl_sparse::query_allocated_ranges(req, &r).await?,
        fsctl::FILE_LEVEL_TRIM => fsctl_sparse::file_level_trim(req, &r).await?,
        fsctl::GET_COMPRESSION => fsctl_sparse::get_compression(req, &r)?,
        fsctl::SET_COMPRESSION => fsctl_sparse::set_compression(req, &r)?,
        fsctl::DUPLICATE_EXTENTS_TO_FILE => fsctl_dup_extents::duplicate_extents(req, &r).await?,
        fsctl::SRV_COPYCHUNK | fsctl::SRV_COPYCHUNK_WRITE => {
            return fsctl_copy::copychunk(req, &r).await
        }
        _ => {
            // A file id must still name an open (3.3.5.15), then the
            // control is not one this server implements.
            if r.file_id != FileId::RELATED || req.related_file_id.is_some() {
                req.open(r.file_id)?;
            }
            return Err(NtStatus::INVALID_DEVICE_REQUEST);
        }
    };
    if output.len() as u32 > r.max_output_response {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    Ok(answer(&r, NtStatus::SUCCESS, output))
}

/// The IOCTL response to `r`: `output`, with `status` (a success or a
/// warning such as STATUS_BUFFER_OVERFLOW, which still carries a body).
pub fn answer(r: &IoctlRequest, status: NtStatus, output: Vec<u8>) -> Reply {
    Reply::with_status(
        status,
        &IoctlResponse {
            ctl_code: r.ctl_code,
            file_id: r.file_id,
            input: Vec::new(),
            output,
            flags: 0,
        },
    )
}

/// MS-SMB2 3.3.5.15.11: the server's interfaces, when multichannel is on.
fn network_interface_info(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    let config = &req.conn.config;
    if !config.multichannel {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if r.file_id
        != (FileId {
            persistent: u64::MAX,
            volatile: u64::MAX,
        })
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // The interfaces as configured now (a reload may have changed them);
    // whether multichannel is offered is the connection's own setting.
    let list = crate::smb::interfaces::list(&req.conn.server.config());
    let mut out = Vec::with_capacity(list.len() * NetworkInterfaceInfo::SIZE);
    encode_network_interface_info(&list, &mut out);
    Ok(out)
}

const FSCTL_GET_OBJECT_ID: u32 = 0x0009_009C;
const FSCTL_CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;

/// MS-FSCC 2.3.3 / 2.1.3.1: FILE_OBJECTID_BUFFER. The object id is derived
/// from the stable file id, so it is the same on every call.
async fn object_id(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    let open = req.open(r.file_id)?;
    let handle = open.handle.clone();
    let file_id = crate::smb::blocking(move || handle.info()).await?.file_id;
    let mut out = vec![0u8; 64];
    out[..8].copy_from_slice(&file_id.to_le_bytes());
    out[8..16].copy_from_slice(&req.conn.server.smb.server_guid[..8]);
    out[16..32].copy_from_slice(&req.conn.server.smb.server_guid);
    let birth: [u8; 16] = out[..16].try_into().expect("16 bytes");
    out[32..48].copy_from_slice(&birth);
    Ok(out)
}

/// MS-SMB2 3.3.5.15.12: the client's view of NEGOTIATE must match ours,
/// else the connection is dropped (a downgrade attack).
fn validate_negotiate(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    let conn = req.conn;
    let neg = conn.negotiated().ok_or(NtStatus::ACCESS_DENIED)?;
    if neg.dialect == braid_smb_proto::messages::negotiate::dialect::SMB311 {
        // 3.1.1 uses preauth integrity instead; Windows drops the connection.
        conn.closing.cancel();
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.file_id
        != (FileId {
            persistent: u64::MAX,
            volatile: u64::MAX,
        })
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let v = match ValidateNegotiateInfoRequest::decode(&r.input) {
        Ok(v) => v,
        Err(_) => {
            conn.closing.cancel();
            return Err(NtStatus::ACCESS_DENIED);
        }
    };
    let chosen = v
        .dialects
        .iter()
        .copied()
        .filter(|d| neg.client_dialects.contains(d))
        .max();
    let ok = v.capabilities == neg.client_capabilities
        && v.guid == neg.client_guid
        && v.security_mode == neg.client_security_mode
        && chosen == Some(neg.dialect);
    if !ok {
        conn.closing.cancel();
        return Err(NtStatus::ACCESS_DENIED);
    }
    let resp = ValidateNegotiateInfoResponse {
        capabilities: neg.server_capabilities,
        guid: conn.server.smb.server_guid,
        security_mode: neg.server_security_mode,
        dialect: neg.dialect,
    };
    let mut out = Vec::with_capacity(24);
    resp.encode(&mut out);
    Ok(out)
}
