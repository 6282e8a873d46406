"""Resource forks in AppleDouble `._NAME` files (`macos_resource = "file"`,
Samba's default `fruit:resource = file`), through smbprotocol:

- a resource fork larger than any xattr round-trips, and lives in a `._`
  file that this test parses itself; clients neither list nor open `._`
  names; the `._` file follows its file's rename and goes with its delete;
- a `._` file macOS wrote (Finder info and extended attributes packed in,
  as xnu writes them) is converted on first use: the attributes become
  named streams, the Finder info the AFP_AfpInfo stream, and the resource
  fork reads back;
- a `._` file that is not AppleDouble is neither read nor overwritten; an
  overwrite of a file drops its resource fork with its other streams;
- the directory moves between Braid and Samba (vfs_fruit with
  `fruit:resource = file`): each reads the resource fork the other wrote.
"""

from __future__ import annotations

import os
import secrets
import shutil
import struct
import types
from pathlib import Path

import pytest
import smbclient
from smbprotocol.exceptions import SMBOSError
from smbprotocol.header import NtStatus

from smbremote import braid_share, option_share_server, unc
from smbremote import read_file as read, write_file as write

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (macos_resource); Samba is started by the test")

BIG_FORK = secrets.token_bytes(200 * 1024)  # past the 64 KiB of an xattr




def sidecar_fork(path: Path) -> tuple[bytes, bytes]:
    """(filler, resource fork) of an AppleDouble file, parsed here."""
    raw = path.read_bytes()
    magic, version, filler, count = struct.unpack_from(">II16sH", raw)
    assert (magic, version, count) == (0x00051607, 0x00020000, 2)
    entries = {eid: (off, length) for eid, off, length in
               (struct.unpack_from(">III", raw, 26 + 12 * i) for i in range(count))}
    off, length = entries[2]
    assert entries[9] == (50, 32)
    return filler, raw[off:off + length]


def macos_sidecar(finder: bytes, xattrs: list[tuple[bytes, bytes]], fork: bytes) -> bytes:
    """An AppleDouble file as macOS writes one: the attributes packed after
    the Finder info (xnu vfs_xattr.c), free space, then the fork."""
    hdr = 50 + 32 + 2
    entries_end = hdr + 36
    for name, _ in xattrs:
        entries_end = (entries_end + 3) & ~3
        entries_end += 11 + len(name) + 1
    data_len = sum(len(v) for _, v in xattrs)
    total = entries_end + data_len
    fork_off = total + 64
    b = bytearray(fork_off + len(fork))
    struct.pack_into(">II16sH", b, 0, 0x00051607, 0x00020000, b"Mac OS X        ", 2)
    struct.pack_into(">III", b, 26, 9, 50, fork_off - 50)
    struct.pack_into(">III", b, 38, 2, fork_off, len(fork))
    b[50:82] = finder
    struct.pack_into(">IIIII", b, hdr, 0x41545452, 0, total, entries_end, data_len)
    struct.pack_into(">H", b, hdr + 34, len(xattrs))
    at, data = hdr + 36, entries_end
    for name, value in xattrs:
        at = (at + 3) & ~3
        struct.pack_into(">IIHB", b, at, data, len(value), 0, len(name) + 1)
        b[at + 11:at + 11 + len(name)] = name
        at += 11 + len(name) + 1
        b[data:data + len(value)] = value
        data += len(value)
    b[fork_off:] = fork
    return bytes(b)


@pytest.fixture(scope="module")
def braid(tmp_path_factory):
    with braid_share(tmp_path_factory.mktemp("adouble-"), 'macos_resource = "file"\n') as (kw, d):
        yield types.SimpleNamespace(kw=kw, dir=d)


def test_a_large_resource_fork_lives_in_a_hidden_dot_underscore_file(braid):
    kw = braid.kw
    write(kw, "mac", "song.aiff", b"audio")
    write(kw, "mac", "song.aiff:AFP_Resource", BIG_FORK)
    assert read(kw, "mac", "song.aiff:AFP_Resource") == BIG_FORK
    streams = {s.name: s.size for s in smbclient.liststreams(unc("mac", "song.aiff"), **kw)}
    assert streams[":AFP_Resource:$DATA"] == len(BIG_FORK)
    filler, fork = sidecar_fork(braid.dir / "._song.aiff")
    assert (filler, fork) == (b"Netatalk        ", BIG_FORK)
    assert not [n for n in os.listxattr(braid.dir / "song.aiff") if "AFP_Resource" in n]
    # Clients see neither the sidecar nor a way to it.
    assert "._song.aiff" not in smbclient.listdir(unc("mac", ""), **kw)
    with pytest.raises(SMBOSError) as e:
        read(kw, "mac", "._song.aiff")
    assert e.value.ntstatus == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    # The sidecar follows a rename and goes with a delete.
    smbclient.rename(unc("mac", "song.aiff"), unc("mac", "tune.aiff"), **kw)
    assert not (braid.dir / "._song.aiff").exists()
    assert read(kw, "mac", "tune.aiff:AFP_Resource") == BIG_FORK
    smbclient.remove(unc("mac", "tune.aiff"), **kw)
    assert not (braid.dir / "._tune.aiff").exists()


def test_a_sidecar_macos_wrote_is_converted_to_streams(braid):
    kw = braid.kw
    (braid.dir / "doc.txt").write_bytes(b"text")
    finder = b"TEXTttxt".ljust(32, b"\0")
    (braid.dir / "._doc.txt").write_bytes(macos_sidecar(
        finder, [(b"com.apple.metadata:_kMDItemUserTags", b"bplist-tags"),
                 (b"com.example.note", b"hello")], b"the fork"))
    assert read(kw, "mac", "doc.txt:AFP_Resource") == b"the fork"
    streams = {s.name: s.size for s in smbclient.liststreams(unc("mac", "doc.txt"), **kw)}
    assert streams == {"::$DATA": 4, ":AFP_AfpInfo:$DATA": 60, ":AFP_Resource:$DATA": 8,
                       ":com.apple.metadata\uf022_kMDItemUserTags:$DATA": 11,
                       ":com.example.note:$DATA": 5}
    assert read(kw, "mac", "doc.txt:com.example.note") == b"hello"
    assert read(kw, "mac", "doc.txt:AFP_AfpInfo")[16:24] == b"TEXTttxt"
    # The sidecar now holds the fork only, right after its header.
    assert (braid.dir / "._doc.txt").stat().st_size == 82 + len(b"the fork")
    assert sidecar_fork(braid.dir / "._doc.txt") == (b"Netatalk        ", b"the fork")


def test_a_dot_underscore_file_that_is_not_appledouble_is_left_alone(braid):
    kw = braid.kw
    write(kw, "mac", "notes.txt", b"notes")
    (braid.dir / "._notes.txt").write_bytes(b"someone's own file, not AppleDouble\n")
    with pytest.raises(SMBOSError) as e:
        read(kw, "mac", "notes.txt:AFP_Resource")
    assert e.value.ntstatus == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    with pytest.raises(SMBOSError) as e:
        write(kw, "mac", "notes.txt:AFP_Resource", b"fork")
    assert e.value.ntstatus == NtStatus.STATUS_ACCESS_DENIED
    assert (braid.dir / "._notes.txt").read_bytes() == b"someone's own file, not AppleDouble\n"


def test_overwriting_a_file_drops_its_resource_fork(braid):
    kw = braid.kw
    write(kw, "mac", "draft.txt", b"v1")
    write(kw, "mac", "draft.txt:AFP_Resource", b"fork")
    write(kw, "mac", "draft.txt", b"v2")  # an overwrite (FILE_OVERWRITE_IF)
    assert not (braid.dir / "._draft.txt").exists()
    streams = {s.name for s in smbclient.liststreams(unc("mac", "draft.txt"), **kw)}
    assert streams == {"::$DATA"}


@pytest.mark.skipif(shutil.which("smbd") is None, reason="needs Samba's smbd")
def test_braid_and_samba_read_each_others_resource_forks(tmp_path):
    # Braid's "fruit" share and Samba's are one directory with
    # fruit:resource = file (servers.OPTION_SHARES).
    shares = tmp_path / "shares"
    shares.mkdir()
    with option_share_server("braid", shares, tmp_path / "b") as kw:
        write(kw, "fruit", "from-braid", b"data")
        write(kw, "fruit", "from-braid:AFP_Resource", BIG_FORK)
    with option_share_server("samba", shares, tmp_path / "s") as kw:
        assert read(kw, "fruit", "from-braid:AFP_Resource") == BIG_FORK
        write(kw, "fruit", "from-samba", b"data")
        write(kw, "fruit", "from-samba:AFP_Resource", BIG_FORK[::-1])
    with option_share_server("braid", shares, tmp_path / "b2") as kw:
        assert read(kw, "fruit", "from-samba:AFP_Resource") == BIG_FORK[::-1]
