#!/usr/bin/python3
"""Ask a server's srvsvc pipe what it has open, with Samba's own DCE/RPC
client (python3-samba, the system Python's), and print it as JSON.

    /usr/bin/python3 srvsvc_probe.py PORT USER PASSWORD [SHARE...]   (USER "" = anonymous)
    /usr/bin/python3 srvsvc_probe.py PORT USER PASSWORD --close FILE_ID
    /usr/bin/python3 srvsvc_probe.py PORT USER PASSWORD --end-sessions \\CLIENT

Prints {"sessions": ..., "connections": {share: ...}, "files": ...,
"tod": ..., "share_info": ...}, or {"close": ...} / {"end": ...}; a call that fails gives {"error": "WERR_..."}
in its place. Used by test_srvsvc.py, which runs on the test Python.
"""

import json
import sys

from samba import credentials, param, werror
from samba.dcerpc import srvsvc

SERVER = "\\\\127.0.0.1"


def attempt(call):
    try:
        return call()
    except Exception as e:  # WERRORError and NTSTATUSError carry (code, text)
        args = getattr(e, "args", ())
        return {"error": args[1] if len(args) > 1 else str(e)}


def sessions(c):
    ctr = srvsvc.NetSessInfoCtr()
    ctr.level, ctr.ctr = 502, srvsvc.NetSessCtr502()
    info, _, _ = c.NetSessEnum(SERVER, None, None, ctr, 0xFFFFFFFF, None)
    return [{"client": s.client, "user": s.user, "opens": s.num_open, "time": s.time,
             "idle": s.idle_time, "flags": s.user_flags, "client_type": s.client_type,
             "transport": s.transport} for s in (info.ctr.array or [])]


def connections(c, qualifier):
    ctr = srvsvc.NetConnInfoCtr()
    ctr.level, ctr.ctr = 1, srvsvc.NetConnCtr1()
    info, _, _ = c.NetConnEnum(SERVER, qualifier, ctr, 0xFFFFFFFF, None)
    return [{"id": t.conn_id, "type": t.conn_type, "opens": t.num_open, "users": t.num_users,
             "time": t.conn_time, "user": t.user, "netname": t.share}
            for t in (info.ctr.array or [])]


def files(c):
    ctr = srvsvc.NetFileInfoCtr()
    ctr.level, ctr.ctr = 3, srvsvc.NetFileCtr3()
    info, _, _ = c.NetFileEnum(SERVER, None, None, ctr, 0xFFFFFFFF, None)
    return [{"id": f.fid, "permissions": f.permissions, "locks": f.num_locks,
             "path": f.path, "user": f.user} for f in (info.ctr.array or [])]


def tod(c):
    t = c.NetRemoteTOD(SERVER)
    return {"elapsed": t.elapsed, "year": t.year, "month": t.month, "day": t.day,
            "hours": t.hours, "mins": t.mins, "secs": t.secs, "weekday": t.weekday,
            "timezone": t.timezone}


def share_info(c, name):
    i = c.NetShareGetInfo(SERVER, name, 2)
    return {"name": i.name, "type": i.type, "current_users": i.current_users, "path": i.path}


def main():
    port, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
    shares = sys.argv[4:]
    lp = param.LoadParm()
    lp.set("smb ports", port)
    creds = credentials.Credentials()
    creds.guess(lp)
    if user:
        creds.set_username(user)
        creds.set_password(password)
    else:
        creds.set_anonymous()
    c = srvsvc.srvsvc("ncacn_np:127.0.0.1[smb2]", lp, creds)
    if shares[:1] == ["--end-sessions"]:
        out = {"end": attempt(lambda: c.NetSessDel(SERVER, shares[1], None) or "ok")}
        json.dump(out, sys.stdout)
        return 0
    if shares[:1] == ["--close"]:
        out = {"close": attempt(lambda: c.NetFileClose(SERVER, int(shares[1])) or "ok")}
        json.dump(out, sys.stdout)
        return 0
    out = {
        "sessions": attempt(lambda: sessions(c)),
        "connections": {s: attempt(lambda s=s: connections(c, s)) for s in shares},
        "files": attempt(lambda: files(c)),
        "tod": attempt(lambda: tod(c)),
        "share_info": {s: attempt(lambda s=s: share_info(c, s)) for s in shares},
    }
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
