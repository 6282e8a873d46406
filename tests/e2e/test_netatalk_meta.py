"""Finder metadata in Netatalk's xattr (`macos_metadata = "netatalk"`,
Samba's default `fruit:metadata = netatalk`), through smbprotocol:

- an AFP_AfpInfo written by a client is stored as a 402-byte AppleDouble
  record in `user.org.netatalk.Metadata` (parsed here), not as a stream;
- a record Netatalk wrote reads as the AfpInfo carrying its Finder info,
  and a write keeps the record's other entries (its dates);
- a Finder info of zeros removes the record, and the stream is gone;
- the directory moves between Braid and Samba (vfs_fruit with
  `fruit:metadata = netatalk`): each reads the Finder info the other wrote.
"""

from __future__ import annotations

import os
import struct
import types

import pytest
import smbclient
from smbprotocol.exceptions import SMBOSError

from smbremote import braid_share, option_share_server, unc
from smbremote import read_file as read, write_file as write

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (macos_metadata); Samba is started by the test")

XATTR = "user.org.netatalk.Metadata"


def afpinfo(finder: bytes) -> bytes:
    return b"AFP\0" + b"\0\0\x01\0" + b"\0" * 4 + b"\x80\0\0\0" + finder.ljust(32, b"\0") \
        + b"\0" * 12


def netatalk_record(finder: bytes, dates: bytes) -> bytes:
    """A record laid out as Netatalk writes one: eight entries, its
    private ones 8, 8, 8 and 4 bytes long."""
    entries = [(4, 154, 0), (8, 354, 16), (9, 122, 32), (14, 370, 4),
               (0x80444556, 374, 8), (0x80494E4F, 382, 8), (0x8053594E, 390, 8),
               (0x8053567E, 398, 4)]
    r = bytearray(402)
    r[0:8] = struct.pack(">II", 0x00051607, 0x00020000)
    r[24:26] = struct.pack(">H", len(entries))
    for i, e in enumerate(entries):
        r[26 + 12 * i:38 + 12 * i] = struct.pack(">III", *e)
    r[122:154] = finder.ljust(32, b"\0")
    r[354:370] = dates
    return bytes(r)


def finder_of(record: bytes) -> bytes:
    """The Finder info of a record, found through its entry table."""
    magic, version = struct.unpack_from(">II", record, 0)
    assert (magic, version) == (0x00051607, 0x00020000)
    (count,) = struct.unpack_from(">H", record, 24)
    for i in range(count):
        eid, off, length = struct.unpack_from(">III", record, 26 + 12 * i)
        if eid == 9:
            assert length >= 32
            return record[off:off + 32]
    raise AssertionError("no Finder info entry")




@pytest.fixture(scope="module")
def braid(tmp_path_factory):
    with braid_share(tmp_path_factory.mktemp("netatalk-"), 'macos_metadata = "netatalk"\n') as (kw, d):
        yield types.SimpleNamespace(kw=kw, dir=d)


def test_finder_info_is_stored_in_netatalk_s_record(braid):
    kw = braid.kw
    write(kw, "mac", "doc.txt", b"text")
    write(kw, "mac", "doc.txt:AFP_AfpInfo", afpinfo(b"TEXTttxt"))
    assert read(kw, "mac", "doc.txt:AFP_AfpInfo") == afpinfo(b"TEXTttxt")
    path = braid.dir / "doc.txt"
    record = os.getxattr(path, XATTR)
    assert len(record) == 402
    assert finder_of(record) == b"TEXTttxt".ljust(32, b"\0")
    assert not any(x.startswith("user.DosStream.AFP_AfpInfo") for x in os.listxattr(path))
    streams = {s.name: s.size for s in smbclient.liststreams(unc("mac", "doc.txt"), **kw)}
    assert streams == {"::$DATA": 4, ":AFP_AfpInfo:$DATA": 60}
    assert path.read_bytes() == b"text"


def test_a_record_netatalk_wrote_is_read_and_keeps_its_dates(braid):
    kw = braid.kw
    write(kw, "mac", "old.txt", b"data")
    path = braid.dir / "old.txt"
    dates = bytes(range(16))
    os.setxattr(path, XATTR, netatalk_record(b"BARRFOOO@", dates))
    assert read(kw, "mac", "old.txt:AFP_AfpInfo") == afpinfo(b"BARRFOOO@")
    write(kw, "mac", "old.txt:AFP_AfpInfo", afpinfo(b"SMB,OLE!"))
    record = os.getxattr(path, XATTR)
    assert finder_of(record) == b"SMB,OLE!".ljust(32, b"\0")
    assert record[354:370] == dates
    assert record[374:382] == netatalk_record(b"", dates)[374:382]


def test_zero_finder_info_removes_the_record(braid):
    kw = braid.kw
    write(kw, "mac", "gone.txt", b"data")
    write(kw, "mac", "gone.txt:AFP_AfpInfo", afpinfo(b"TEXTttxt"))
    path = braid.dir / "gone.txt"
    assert XATTR in os.listxattr(path)
    write(kw, "mac", "gone.txt:AFP_AfpInfo", afpinfo(b""))
    assert XATTR not in os.listxattr(path)
    with pytest.raises(SMBOSError):
        read(kw, "mac", "gone.txt:AFP_AfpInfo")
    # A record without Finder info (Netatalk keeps one for its dates) is no
    # stream, and is left as it is.
    os.setxattr(path, XATTR, netatalk_record(b"", bytes(16)))
    with pytest.raises(SMBOSError):
        read(kw, "mac", "gone.txt:AFP_AfpInfo")
    assert os.getxattr(path, XATTR) == netatalk_record(b"", bytes(16))


def test_braid_and_samba_read_each_others_finder_info(tmp_path):
    # Braid's "netatalk" share and Samba's are one directory with
    # fruit:metadata = netatalk (servers.OPTION_SHARES).
    shares = tmp_path / "shares"
    shares.mkdir()
    with option_share_server("braid", shares, tmp_path / "b") as kw:
        write(kw, "netatalk", "from-braid", b"data")
        write(kw, "netatalk", "from-braid:AFP_AfpInfo", afpinfo(b"BRAIDbrd"))
    with option_share_server("samba", shares, tmp_path / "s") as kw:
        assert read(kw, "netatalk", "from-braid:AFP_AfpInfo") == afpinfo(b"BRAIDbrd")
        write(kw, "netatalk", "from-samba", b"data")
        write(kw, "netatalk", "from-samba:AFP_AfpInfo", afpinfo(b"SAMBAsmb"))
    assert finder_of(os.getxattr(shares / "netatalk" / "from-samba", XATTR))[:8] == b"SAMBAsmb"
    with option_share_server("braid", shares, tmp_path / "b2") as kw:
        assert read(kw, "netatalk", "from-samba:AFP_AfpInfo") == afpinfo(b"SAMBAsmb")
