//! `braid status`: the sessions and channels of a running server, SMB and
//! NFS (then its NFS client records), read from its admin API (`GET
//! /api/v1/sessions`, docs/ADMIN.md) and printed like Windows'
//! `Get-SmbMultichannelConnection`, or as JSON with `--json`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;

/// Fetch `path` from the admin API at `addr` with a plain HTTP/1.1 GET,
/// with `token` as its bearer token; returns the body of a 200 response.
pub fn http_get(addr: &str, path: &str, token: Option<&str>) -> Result<String, String> {
    let sock: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| format!("--admin {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("--admin {addr}: no address"))?;
    let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(5)).map_err(|e| {
        format!(
            "cannot reach the admin API at {addr}: {e}; is braid serving, with admin_listen at this address? (--admin ADDR)"
        )
    })?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n{authorization}Connection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("admin API at {addr}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("admin API at {addr}: {e}"))?;
    parse_response(&raw).map_err(|e| format!("admin API at {addr}: {e}"))
}

/// Split an HTTP/1.1 response into status and body (content-length,
/// chunked, or read-to-close); anything but 200 is an error.
pub fn parse_response(raw: &[u8]) -> Result<String, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("incomplete HTTP response")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = &raw[split + 4..];
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let code: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {status_line:?}"))?;
    let mut chunked = false;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if k.eq_ignore_ascii_case("content-length") {
                if let Ok(n) = v.parse::<usize>() {
                    body = &body[..n.min(body.len())];
                }
            }
        }
    }
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    let body = String::from_utf8(body).map_err(|_| "response is not UTF-8".to_string())?;
    if code != 200 {
        return Err(format!("{status_line}: {}", body.trim()));
    }
    Ok(body)
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunked body")?;
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let n = usize::from_str_radix(size_text, 16).map_err(|_| "bad chunk size")?;
        b = &b[eol + 2..];
        if n == 0 {
            return Ok(out);
        }
        if b.len() < n + 2 {
            return Err("truncated chunked body".into());
        }
        out.extend_from_slice(&b[..n]);
        b = &b[n + 2..];
    }
}

/// `opens`: the open files (`/api/v1/opens`) instead of the sessions;
/// `shares`: each share's provisioned performance (`/api/v1/shares`);
/// `advice`: the advisor's findings (`/api/v1/advice`).
pub fn run(
    admin: &str,
    json: bool,
    opens: bool,
    shares: bool,
    advice: bool,
    token_file: Option<&std::path::Path>,
) -> Result<(), String> {
    let path = if opens {
        "/api/v1/opens"
    } else if shares {
        "/api/v1/shares"
    } else if advice {
        "/api/v1/advice"
    } else {
        "/api/v1/sessions"
    };
    let token = match token_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| format!("--admin-token-file {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let body = http_get(admin, path, token.as_deref().map(str::trim))?;
    if json {
        println!("{}", body.trim_end());
        return Ok(());
    }
    let v: Value =
        serde_json::from_str(&body).map_err(|e| format!("admin API at {admin}: bad JSON: {e}"))?;
    if shares {
        print!("{}", crate::status_shares::render_shares(&v));
    } else if opens {
        print!("{}", render_opens(&v));
    } else if advice {
        print!("{}", render_advice(&v));
    } else {
        print!("{}", render_table(&v));
    }
    Ok(())
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) if s.is_empty() => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// 1536 -> "1.5 KiB".
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The `Get-SmbMultichannelConnection`-like table: one line per session,
/// one indented line per channel under it.
pub fn render_table(v: &Value) -> String {
    let empty = Vec::new();
    let sessions = v["sessions"].as_array().unwrap_or(&empty);
    if sessions.is_empty() {
        return "no sessions\n".into();
    }
    let headers = [
        "Session",
        "Protocol",
        "User",
        "Client",
        "Dialect",
        "Signing",
        "Encryption",
        "MaxChannels",
        "CurrentChannels",
    ];
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|x| {
            let user = match (x["domain"].as_str(), x["user"].as_str()) {
                (_, Some("")) | (_, None) => "(anonymous)".to_string(),
                (Some(d), Some(u)) if !d.is_empty() => format!("{d}\\{u}"),
                (_, Some(u)) => u.to_string(),
            };
            let client = match (x["client_address"].as_str(), x["client_name"].as_str()) {
                (Some(a), Some(n)) => format!("{a} ({n})"),
                (Some(a), None) => a.to_string(),
                (None, Some(n)) => n.to_string(),
                (None, None) => "-".into(),
            };
            vec![
                s(&x["id_hex"]),
                x["protocol"].as_str().unwrap_or("smb").to_string(),
                user,
                client,
                s(&x["dialect"]),
                s(&x["signing"]),
                s(&x["encryption"]),
                s(&x["max_channels"]),
                s(&x["current_channels"]),
            ]
        })
        .collect();
    let lines = aligned(&headers, &rows);
    let mut out = lines[0].clone() + &lines[1];
    for (x, line) in sessions.iter().zip(&lines[2..]) {
        out.push_str(line);
        for ch in x["channels"].as_array().unwrap_or(&empty) {
            // NFS: which channels of the session the connection carries.
            let role = match (ch["fore"].as_bool(), ch["back"].as_bool()) {
                (Some(true), Some(true)) => "  [fore+back]",
                (Some(false), Some(true)) => "  [back]",
                _ => "",
            };
            out.push_str(&format!(
                "    {} -> {}  since {}  requests {}  in {}  out {}{role}\n",
                s(&ch["local_address"]),
                s(&ch["remote_address"]),
                s(&ch["connected_since"]),
                s(&ch["requests"]),
                human_bytes(ch["bytes_in"].as_u64().unwrap_or(0)),
                human_bytes(ch["bytes_out"].as_u64().unwrap_or(0)),
            ));
        }
    }
    out.push_str(&render_nfs_clients(v));
    out
}

/// The NFS client records (`nfs_clients`), after the sessions: one line
/// each, with its sessions and state.
fn render_nfs_clients(v: &Value) -> String {
    let Some(clients) = v["nfs_clients"].as_array().filter(|c| !c.is_empty()) else {
        return String::new();
    };
    let headers = [
        "NFS client",
        "Owner",
        "Address",
        "Principal",
        "State",
        "Sessions",
        "Opens",
        "Locks",
        "Delegations",
    ];
    let rows: Vec<Vec<String>> = clients
        .iter()
        .map(|c| {
            vec![
                s(&c["client_id"]),
                s(&c["owner"]),
                s(&c["address"]),
                s(&c["principal"]),
                s(&c["state"]),
                c["session_ids"]
                    .as_array()
                    .map_or(0, |a| a.len())
                    .to_string(),
                s(&c["opens"]),
                s(&c["locks"]),
                s(&c["delegations"]),
            ]
        })
        .collect();
    "\n".to_string() + &aligned(&headers, &rows).concat()
}

/// Columns padded to their widest cell: the header line, a line of
/// dashes, then one line per row (each ending in a newline).
fn aligned(headers: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    let mut out = vec![
        line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>()),
        line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>()),
    ];
    out.extend(rows.iter().map(|r| line(r)));
    out
}

/// `braid status --advice`: per finding, who it is about, the advice, and
/// its evidence indented under it.
pub fn render_advice(v: &Value) -> String {
    let empty = Vec::new();
    let lines = v["advice"].as_array().unwrap_or(&empty);
    let window = v["window_seconds"].as_u64().unwrap_or(60);
    if lines.is_empty() {
        return format!(
            "no advice: no session shows a pattern worth a word in the last {window} s\n"
        );
    }
    let mut out = String::new();
    for a in lines {
        let share = a["share"]
            .as_str()
            .map(|s| format!(" on {s}"))
            .unwrap_or_default();
        let ended = if a["active"] == false { " (ended)" } else { "" };
        out.push_str(&format!(
            "{} session 0x{:016x} from {}{share}{ended} [{}]\n  {}\n",
            s(&a["protocol"]),
            a["session_id"].as_u64().unwrap_or(0),
            s(&a["client_address"]),
            s(&a["id"]),
            s(&a["headline"]),
        ));
        for e in a["evidence"].as_array().unwrap_or(&empty) {
            out.push_str(&format!("    - {}\n", s(e)));
        }
    }
    out
}

/// `braid status --opens`: one line per open, as `smbstatus` lists locked
/// files.
pub fn render_opens(v: &Value) -> String {
    let empty = Vec::new();
    let opens = v["opens"].as_array().unwrap_or(&empty);
    if opens.is_empty() {
        return "no open files\n".into();
    }
    let headers = [
        "Session",
        "User",
        "Client",
        "Share",
        "Path",
        "Access",
        "ShareMode",
        "Caching",
        "Locks",
        "Durable",
    ];
    let rows: Vec<Vec<String>> = opens
        .iter()
        .map(|o| {
            let mut path = o["path"].as_str().unwrap_or_default().to_string();
            if o["directory"].as_bool() == Some(true) {
                path.push('\\');
            }
            vec![
                s(&o["session_id_hex"]),
                s(&o["user"]),
                s(&o["client_address"]),
                s(&o["share"]),
                path,
                s(&o["access"]),
                s(&o["share_access"]),
                s(&o["caching"]),
                s(&o["locks"]),
                match (
                    o["disconnected"].as_bool() == Some(true),
                    o["durable"].as_bool() == Some(true),
                    // Kept in the state store: it outlives a restart.
                    o["persistent"].as_bool() == Some(true),
                ) {
                    (true, _, true) => "waiting, persistent",
                    (true, _, false) => "waiting",
                    (false, _, true) => "persistent",
                    (false, true, false) => "yes",
                    (false, false, false) => "no",
                }
                .into(),
            ]
        })
        .collect();
    aligned(&headers, &rows).concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_lines_with_evidence() {
        let v: Value = serde_json::from_str(
            r#"{"window_seconds":60,"advice":[{"protocol":"smb","session_id":4097,
            "client_address":"127.0.0.1","share":"data","active":false,
            "id":"single_request_small_io","headline":"keeps one request in flight",
            "evidence":["1.00 requests in flight","I/O sizes: 4 KiB 100%"]}]}"#,
        )
        .unwrap();
        assert_eq!(
            render_advice(&v),
            "smb session 0x0000000000001001 from 127.0.0.1 on data (ended) [single_request_small_io]\n  keeps one request in flight\n    - 1.00 requests in flight\n    - I/O sizes: 4 KiB 100%\n"
        );
        let none: Value = serde_json::from_str(r#"{"window_seconds":60,"advice":[]}"#).unwrap();
        assert!(render_advice(&none).starts_with("no advice"));
    }

    #[test]
    fn parses_responses() {
        let r = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{\"sessions\":[]}";
        assert_eq!(parse_response(r).unwrap(), "{\"sessions\":[]}");
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), "{\"a\":1}");
        let r = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        assert!(parse_response(r).unwrap_err().contains("404"));
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn bytes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
    }

    #[test]
    fn table() {
        let v: Value = serde_json::from_str(
            r#"{"sessions":[{"id":1,"id_hex":"0x0000000000000001","user":"alice","domain":"WORKGROUP",
            "client_address":"127.0.0.1","client_name":"PC1","dialect":"3.1.1","signing":"AES-128-GMAC",
            "encryption":null,"max_channels":32,"current_channels":2,"channels":[
            {"local_address":"127.0.0.1:4445","remote_address":"127.0.0.1:50000","connected_since":"2026-01-01T00:00:00.000Z","requests":10,"bytes_in":2048,"bytes_out":100},
            {"local_address":"127.0.0.2:4445","remote_address":"127.0.0.2:50001","connected_since":"2026-01-01T00:00:01.000Z","requests":3,"bytes_in":10,"bytes_out":20}]}]}"#,
        )
        .unwrap();
        let t = render_table(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(lines[0].starts_with("Session"), "{t}");
        assert!(lines[0].ends_with("MaxChannels  CurrentChannels"), "{t}");
        assert!(lines[2].contains(" smb "), "{t}");
        assert!(lines[2].contains("WORKGROUP\\alice"), "{t}");
        assert!(lines[2].contains("127.0.0.1 (PC1)"), "{t}");
        assert!(lines[2].contains("AES-128-GMAC"), "{t}");
        assert!(lines[2].ends_with(" 2"), "{t}");
        assert_eq!(
            lines[3],
            "    127.0.0.1:4445 -> 127.0.0.1:50000  since 2026-01-01T00:00:00.000Z  requests 10  in 2.0 KiB  out 100 B"
        );
        assert_eq!(
            render_table(&serde_json::json!({"sessions": []})),
            "no sessions\n"
        );
    }

    #[test]
    fn nfs_sessions_and_clients() {
        let v = serde_json::json!({
            "sessions": [{"protocol": "nfs", "id": 7,
                "id_hex": "0x000000010000000100000002deadbeef", "user": "uid 0",
                "domain": "", "client_address": "198.18.0.2",
                "client_name": "Linux NFSv4.1 vm", "dialect": "4.1", "signing": null,
                "encryption": null, "max_channels": 64, "current_channels": 4,
                "channels": [
                    {"local_address": "198.18.0.1:2049", "remote_address": "198.18.0.2:700",
                     "connected_since": "2026-01-01T00:00:00.000Z", "requests": 5,
                     "bytes_in": 10, "bytes_out": 20, "fore": true, "back": true},
                    {"local_address": "198.18.0.1:2049", "remote_address": "198.18.0.2:701",
                     "connected_since": "2026-01-01T00:00:00.000Z", "requests": 5,
                     "bytes_in": 10, "bytes_out": 20, "fore": true, "back": false}]}],
            "nfs_clients": [{"client_id": "0x0000000100000001", "owner": "Linux NFSv4.1 vm",
                "address": "198.18.0.2", "principal": "uid 0", "state": "confirmed",
                "session_ids": ["0x000000010000000100000002deadbeef"], "opens": 3,
                "locks": 1, "delegations": 0}]});
        let t = render_table(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[2].contains(" nfs ") && lines[2].contains("uid 0"),
            "{t}"
        );
        assert!(lines[2].contains("198.18.0.2 (Linux NFSv4.1 vm)"), "{t}");
        assert!(lines[2].ends_with(" 4"), "{t}");
        assert!(lines[3].ends_with("[fore+back]"), "{t}");
        assert!(lines[4].ends_with("out 20 B"), "{t}");
        assert_eq!(lines[5], "");
        assert!(lines[6].starts_with("NFS client"), "{t}");
        assert!(
            lines[8].contains("confirmed") && lines[8].contains("Linux NFSv4.1 vm"),
            "{t}"
        );
    }

    #[test]
    fn opens_table() {
        let v = serde_json::json!({"opens": [
            {"session_id_hex": "0x0000000000000001", "user": "alice", "client_address": "127.0.0.1",
             "share": "data", "path": "docs\\a.txt", "directory": false, "access": "0x0012019f",
             "share_access": "R", "caching": "lease RWH", "locks": 2, "durable": true},
            {"session_id_hex": "0x0000000000000001", "user": "alice", "client_address": "127.0.0.1",
             "share": "data", "path": "", "directory": true, "access": "0x00100081",
             "share_access": "RWD", "caching": "none", "locks": 0, "durable": false},
            {"session_id_hex": null, "user": "bob", "client_address": null,
             "share": "data", "path": "b.bin", "directory": false, "access": "0x0012019f",
             "share_access": "", "caching": "oplock batch", "locks": 0, "durable": true,
             "disconnected": true},
            {"session_id_hex": null, "user": "carol", "client_address": null,
             "share": "ca", "path": "c.bin", "directory": false, "access": "0x0012019f",
             "share_access": "R", "caching": "none", "locks": 1, "durable": true,
             "persistent": true, "disconnected": true}]});
        let t = render_opens(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6, "{t}");
        assert!(
            lines[0].starts_with("Session") && lines[0].ends_with("Locks  Durable"),
            "{t}"
        );
        assert!(
            lines[2].contains("docs\\a.txt") && lines[2].contains("lease RWH"),
            "{t}"
        );
        assert!(lines[2].ends_with(" 2      yes"), "{t}");
        assert!(lines[3].contains("  \\  "), "the share's root: {t}");
        assert!(
            lines[4].starts_with("-  ") && lines[4].ends_with(" waiting"),
            "{t}"
        );
        assert!(lines[5].ends_with(" waiting, persistent"), "{t}");
        assert_eq!(
            render_opens(&serde_json::json!({"opens": []})),
            "no open files\n"
        );
    }
}
