//! Calls about the server itself (MS-SRVS 3.1.4.17, 3.1.4.21 - 3.1.4.23,
//! 3.1.4.26, and the character-device calls of 3.1.4.1 - 3.1.4.7).

use std::time::UNIX_EPOCH;

use super::*;
use crate::calendar::{civil_from_days, weekday};

/// The SERVER_INFO arms the IDL knows (MS-SRVS 2.2.3.7).
const SERVER_INFO_ARMS: &[u32] = &[
    100, 101, 102, 402, 403, 502, 503, 599, 1005, 1010, 1016, 1017, 1018, 1107, 1501, 1502, 1503,
    1506, 1509, 1510, 1511, 1512, 1513, 1514, 1515, 1516, 1518, 1520, 1521, 1522, 1523, 1524, 1525,
    1528, 1529, 1530, 1533, 1534, 1535, 1536, 1537, 1538, 1539, 1540, 1541, 1542, 1543, 1544, 1545,
    1546, 1547, 1548, 1549, 1550, 1552, 1553, 1554, 1555, 1556,
];

/// MS-SRVS 2.2.4.40 - 2.2.4.42: SERVER_INFO_100, 101, 102.
fn server_info_fields(level: u32, info: &ServerInfo) -> Option<Vec<Field<'_>>> {
    let mut fields = vec![Dword(PLATFORM_ID_NT), Str(Some(info.name.as_str()))];
    if level == 100 {
        return Some(fields);
    }
    if level != 101 && level != 102 {
        return None;
    }
    fields.extend([
        Dword(info.version_major),
        Dword(info.version_minor),
        Dword(info.server_type),
        Str(Some(info.comment.as_str())),
    ]);
    if level == 102 {
        // users: no limit; disc: Windows' 15-minute autodisconnect; hidden:
        // SV_VISIBLE; announce/anndelta: Windows' 240 s and 3000 ms;
        // licenses: unused since NT 4.
        fields.extend([
            Dword(u32::MAX),
            Dword(15),
            Dword(0),
            Dword(240),
            Dword(3000),
            Dword(0),
            Str(Some("C:\\")),
        ]);
    }
    Some(fields)
}

/// MS-SRVS 3.1.4.17 NetrServerGetInfo (opnum 21).
pub(super) fn server_get_info(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let level = r.u32()?;
    let info = backend.server_info();
    Ok(match server_info_fields(level, &info) {
        // Level 102 is for administrators on Windows.
        Some(_) if level == 102 && backend.caller_is_anonymous() => {
            info_answer(level, SERVER_INFO_ARMS, None, werror::ACCESS_DENIED)
        }
        Some(fields) => info_answer(level, SERVER_INFO_ARMS, Some(fields), werror::SUCCESS),
        None => info_answer(level, SERVER_INFO_ARMS, None, werror::INVALID_LEVEL),
    })
}

const CHAR_DEV_LEVELS: Levels = &[
    (0, Some(&[Kind::Str])),
    (1, Some(&[Kind::Str, Kind::Dword, Kind::Str, Kind::Dword])),
];
const CHAR_DEV_Q_LEVELS: Levels = &[
    (0, Some(&[Kind::Str])),
    (
        1,
        Some(&[Kind::Str, Kind::Dword, Kind::Str, Kind::Dword, Kind::Dword]),
    ),
];

/// MS-SRVS 3.1.4.1 NetrCharDevEnum (opnum 0) and 3.1.4.4 NetrCharDevQEnum
/// (opnum 3, `queue` true): serial devices are not shared, so both answer
/// ERROR_NOT_SUPPORTED, as Windows does.
pub(super) fn char_dev_enum(stub: Stub<'_>, queue: u32) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let levels = if queue == 1 {
        optional_string(&mut r)?; // UserName
        CHAR_DEV_Q_LEVELS
    } else {
        CHAR_DEV_LEVELS
    };
    let req = read_enum_tail(&mut r, levels)?;
    Ok(enum_answer(&req, levels, Err(werror::NOT_SUPPORTED)))
}

/// MS-SRVS 3.1.4.26 NetrServerDiskEnum (opnum 23): every disk share is
/// reported as on drive C: (as level 2 of NetrShareGetInfo reports its
/// path), so the answer is "C:" or nothing.
pub(super) fn disk_enum(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let level = r.u32()?;
    // DISK_ENUM_CONTAINER: the server MUST ignore what it holds, but it
    // must be read past to reach the parameters after it.
    r.u32()?;
    if r.unique_pointer()? {
        let _max_count = r.u32()?;
        let _offset = r.u32()?;
        let count = r.u32()? as usize;
        if count.saturating_mul(8) > r.remaining() {
            return Err(NdrError::Truncated(r.pos()));
        }
        for _ in 0..count {
            let _offset = r.u32()?;
            let units = r.u32()? as usize;
            for _ in 0..units {
                r.u16()?;
            }
        }
    }
    r.u32()?; // PreferedMaximumLength
    let resume_handle = r.unique_pointer()?;
    if resume_handle {
        r.u32()?;
    }

    let status = if level != 0 {
        werror::INVALID_LEVEL
    } else if backend.caller_is_anonymous() {
        werror::ACCESS_DENIED
    } else {
        werror::SUCCESS
    };
    let disks: Vec<&str> = if status == werror::SUCCESS
        && backend
            .shares()
            .iter()
            .any(|s| s.share_type & 0xFF == share_type::DISK)
    {
        vec!["C:"]
    } else {
        Vec::new()
    };
    let mut w = NdrWriter::new();
    // MS-SRVS 2.2.4.92 DISK_ENUM_CONTAINER: EntriesRead, then a conformant
    // varying array of DISK_INFO, each a `[string] WCHAR Disk[3]`: offset,
    // actual count, the characters with their NUL.
    w.u32(disks.len() as u32);
    if disks.is_empty() {
        w.null_pointer();
    } else {
        w.referent();
        w.u32(disks.len() as u32);
        w.u32(0);
        w.u32(disks.len() as u32);
        for disk in &disks {
            let units: Vec<u16> = disk.encode_utf16().chain(std::iter::once(0)).collect();
            w.u32(0);
            w.u32(units.len() as u32);
            for u in units {
                w.u16(u);
            }
        }
    }
    write_enum_tail(&mut w, disks.len() as u32, resume_handle, status);
    Ok(w.into_bytes())
}

const TRANSPORT_LEVELS: Levels = &[
    (0, Some(TRANSPORT_INFO_2.split_at(5).0)),
    (1, Some(TRANSPORT_INFO_2.split_at(6).0)),
    (2, Some(&TRANSPORT_INFO_2)),
    (3, None),
];
/// SERVER_TRANSPORT_INFO_2; levels 0 and 1 are its first 5 and 6 members.
const TRANSPORT_INFO_2: [Kind; 7] = [
    Kind::Dword,
    Kind::Str,
    Kind::Bytes,
    Kind::Dword,
    Kind::Str,
    Kind::Str,
    Kind::Dword,
];

/// MS-SRVS 2.2.4.95 - 2.2.4.97: SERVER_TRANSPORT_INFO_0, 1, 2.
fn transport_info(level: u32, t: &TransportEntry) -> Option<Vec<Field<'_>>> {
    let mut fields = vec![
        Dword(t.connections),
        Str(Some(t.name.as_str())),
        Bytes(Some(t.address.as_slice())),
        Dword(t.address.len() as u32),
        Str(Some(t.network_address.as_str())),
    ];
    match level {
        0 => {}
        1 => fields.push(Str(Some(t.domain.as_str()))),
        // Flags 0: no SVTI2_* behaviour asked for.
        2 => fields.extend([Str(Some(t.domain.as_str())), Dword(0)]),
        _ => return None,
    }
    Some(fields)
}

/// MS-SRVS 3.1.4.23 NetrServerTransportEnum (opnum 26): the addresses
/// the server listens on.
pub(super) fn transport_enum(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let req = read_enum_tail(&mut r, TRANSPORT_LEVELS)?;
    let transports = backend.transports();
    let rows = match refusal(req.level, &[0, 1, 2], backend) {
        Some(status) => Err(status),
        None => Ok(transports
            .iter()
            .filter_map(|t| transport_info(req.level, t))
            .collect()),
    };
    Ok(enum_answer(&req, TRANSPORT_LEVELS, rows))
}

/// Windows' clock tick, in units of 0.0001 s (MS-SRVS 2.2.4.105).
const TICK_INTERVAL: u32 = 310;

/// MS-SRVS 3.1.4.21 NetrRemoteTOD (opnum 28): the server's time of day in
/// UTC (tod_timezone 0), `net time`'s source.
pub(super) fn remote_tod(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let since_epoch = backend.now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let days = (secs / 86_400) as i64;
    let in_day = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut w = NdrWriter::new();
    // [out, ref] LPTIME_OF_DAY_INFO*: the unique pointer, then the structure.
    w.referent();
    for v in [
        u32::try_from(secs).unwrap_or(u32::MAX),
        // tod_msecs counts from an arbitrary start, here the server's.
        backend.uptime().as_millis() as u32,
        (in_day / 3600) as u32,
        (in_day % 3600 / 60) as u32,
        (in_day % 60) as u32,
        since_epoch.subsec_millis() / 10,
        0,
        TICK_INTERVAL,
        day,
        month,
        year as u32,
        weekday(days),
    ] {
        w.u32(v);
    }
    w.u32(werror::SUCCESS);
    Ok(w.into_bytes())
}
