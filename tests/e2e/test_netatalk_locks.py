"""Netatalk's open and deny-mode locks (`netatalk_locking = true`, Samba's
`fruit:locking = netatalk`), against a local process that takes them as
Netatalk does: one-byte `fcntl` locks just below the largest file offset
(Netatalk's adouble.h, AD_FILELOCK_*).

- an AFP open that denies writing keeps SMB writers out, not readers;
- an SMB open shows up in Netatalk's bytes while it lasts, its deny mode
  too, and they go when it closes;
- on a share without the option, Netatalk's bytes are not looked at.
"""

from __future__ import annotations

import fcntl
import os
import types

import pytest
import smbclient
from smbprotocol.exceptions import SMBOSError

from smbremote import braid_share, unc

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (netatalk_locking)")

STATUS_SHARING_VIOLATION = 0xC0000043
BASE = 2**63 - 1 - 9
OPEN_WR, OPEN_RD, DENY_WR, DENY_RD = BASE, BASE + 1, BASE + 4, BASE + 5


@pytest.fixture(scope="module")
def braid(tmp_path_factory):
    with braid_share(tmp_path_factory.mktemp("ntlock-"), "netatalk_locking = true\n") as (kw, d):
        yield types.SimpleNamespace(kw=kw, dir=d)


def afp_open(path, *offsets):
    """What Netatalk does on an AFP open: read-lock the bytes of what the
    open does and denies. The locks last until the file is closed."""
    f = open(path, "r+b")
    for off in offsets:
        fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, off)
    return f


def held(path, offset) -> bool:
    """Whether someone else holds byte `offset` (Netatalk's test: try to
    write-lock it)."""
    with open(path, "r+b") as f:
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
        except OSError:
            return True
        fcntl.lockf(f, fcntl.LOCK_UN, 1, offset)
        return False


def smb_open(kw, name, mode, share):
    return smbclient.open_file(unc("mac", name), mode=mode, share_access=share, **kw)


def test_an_afp_open_denying_writes_keeps_smb_writers_out(braid):
    path = braid.dir / "report.txt"
    path.write_bytes(b"quarterly")
    afp = afp_open(path, OPEN_RD, DENY_WR)
    try:
        with pytest.raises(SMBOSError) as err:
            smb_open(braid.kw, "report.txt", "r+b", "rw")
        assert err.value.ntstatus == STATUS_SHARING_VIOLATION
        # Reading, and letting the AFP client read, is what it allows.
        with smb_open(braid.kw, "report.txt", "rb", "rw") as f:
            assert f.read() == b"quarterly"
        # An SMB open that would deny the AFP reader is refused too (no
        # share access at all: smbclient adds FILE_SHARE_READ to any other
        # for a reading mode).
        with pytest.raises(SMBOSError) as err:
            smb_open(braid.kw, "report.txt", "rb", "")
        assert err.value.ntstatus == STATUS_SHARING_VIOLATION
    finally:
        afp.close()
    with smb_open(braid.kw, "report.txt", "r+b", "rw") as f:
        f.write(b"Q")
    assert path.read_bytes() == b"Quarterly"


def test_an_smb_open_shows_in_netatalk_s_bytes_while_it_lasts(braid):
    path = braid.dir / "notes.txt"
    path.write_bytes(b"notes")
    with smb_open(braid.kw, "notes.txt", "r+b", "r"):
        assert held(path, OPEN_RD)
        assert held(path, OPEN_WR)
        assert held(path, DENY_WR)
        assert not held(path, DENY_RD)
    for off in (OPEN_RD, OPEN_WR, DENY_WR):
        assert not held(path, off)


def test_without_the_option_netatalk_s_bytes_are_not_looked_at(tmp_path):
    with braid_share(tmp_path, "") as (kw, d):
        path = d / "plain.txt"
        path.write_bytes(b"plain")
        afp = afp_open(path, OPEN_RD, DENY_WR)
        try:
            with smb_open(kw, "plain.txt", "r+b", "rw") as f:
                f.write(b"P")
        finally:
            afp.close()
        assert path.read_bytes() == b"Plain"
