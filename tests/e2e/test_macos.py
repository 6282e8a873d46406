"""macOS clients: Apple's SMB2 extensions (the AAPL create context), seen
through smbprotocol sending what a Mac sends:

- the AAPL reply: capabilities, the configured model (Finder's icon);
- a listing once AAPL is negotiated carries each file's resource fork size,
  Finder type/creator and UNIX mode where the short name would be, and
  a plain client on the same share still gets plain entries;
- the UNIX mode as an S-1-5-88-3 ACE: read back, and set (a chmod);
- a Time Machine share is as big as its `time_machine_max_size`, less
  what the sparse bundles on it take;
- a bad `time_machine_max_size` is one config line.

Braid only: the config keys are Braid's (smbtorture's vfs.fruit tests run
against both servers, Samba with vfs_fruit).
"""

from __future__ import annotations

import os
import secrets
import struct
import types

import pytest
from smbprotocol.create_contexts import SMB2CreateContextRequest
from smbprotocol.open import (CreateDisposition, CreateOptions, DirectoryAccessMask,
                              FileInformationClass,
                              FilePipePrinterAccessMask, ImpersonationLevel, Open)

import servers
from smbremote import DACL, SHARE_ALL, RawClient, dacl_of

pytestmark = pytest.mark.skipif(
    os.environ.get("BRAID_E2E_TARGET", "braid") != "braid",
    reason="Braid's config format (macos_model, time_machine_max_size)")

MODEL = "Xserve"
TM_CAP = 64 << 20
BAND = 8 << 20
# AAPL server query: every reply part; the client reads directory
# attributes and NFS ACEs (what macOS sends).
AAPL_QUERY = struct.pack("<IIQQ", 1, 0, 1 | 2 | 4, 1 | 4 | 8)
AAPL_UNIX_BASED, AAPL_READ_DIR_ATTR, AAPL_COPYFILE, AAPL_NFS_ACE = 4, 1, 2, 8


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("macos-")
    mac, tm = base / "mac", base / "tm"
    mac.mkdir()
    tm.mkdir()
    # A Time Machine backup already on the share: 3 bands of 8 MiB.
    bundle = tm / "laptop.sparsebundle"
    (bundle / "bands").mkdir(parents=True)
    (bundle / "Info.plist").write_text(
        "<dict>\n\t<key>band-size</key>\n\t<integer>8388608</integer>\n</dict>\n")
    for band in "012":
        (bundle / "bands" / band).write_bytes(b"x")
    passwords = {"alice": "Pw-" + secrets.token_hex(8)}
    config = (f'macos_model = "{MODEL}"\n'
              f'[[share]]\nname = "mac"\npath = "{mac}"\n'
              f'[[share]]\nname = "tm"\npath = "{tm}"\ntime_machine = true\n'
              f'time_machine_max_size = "{TM_CAP >> 20}M"\n')
    proc, port = servers.start_braid_with_config(base, config, passwords)
    yield types.SimpleNamespace(port=port, passwords=passwords, mac=mac, tm=tm)
    servers.stop_pid(proc.pid)


def client(srv, share: str) -> RawClient:
    return RawClient(types.SimpleNamespace(host="127.0.0.1", port=srv.port, user="alice",
                                           password=srv.passwords["alice"], share=share))


def negotiate_aapl(c: RawClient) -> bytes:
    """Open the share root with an AAPL query, as a Mac's first CREATE;
    the reply context's data."""
    ctx = SMB2CreateContextRequest()
    ctx["buffer_name"] = b"AAPL"
    ctx["buffer_data"] = AAPL_QUERY
    root = Open(c.tree, "")
    replies = root.create(ImpersonationLevel.Impersonation,
                          FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES, 0x10, SHARE_ALL,
                          CreateDisposition.FILE_OPEN, CreateOptions.FILE_DIRECTORY_FILE,
                          create_contexts=[ctx])
    root.close()
    # smbprotocol hands back the data of contexts it does not know as bytes;
    # no other context was asked for.
    answers = [r for r in replies or [] if isinstance(r, bytes)]
    assert len(answers) == 1, replies
    return answers[0]


def write_stream(c: RawClient, name: str, data: bytes) -> None:
    f = c.open(name, FilePipePrinterAccessMask.GENERIC_WRITE, CreateDisposition.FILE_OPEN_IF)
    f.write(data, 0)
    f.close()


def afp_info(type_creator: bytes) -> bytes:
    """A 60-byte AfpInfo: signature, version, reserved, backup date, then
    FinderInfo (type and creator first) and ProDOS info."""
    finder = type_creator.ljust(32, b"\0")
    # Version 0x00000100 big-endian, as Samba's MacExtensions.h has it and
    # smbtorture vfs.fruit reads it back ("AFP\0\0\0\x01\0"); the share
    # refuses a write of any other version (braid-fs mac_streams.rs).
    return b"AFP\0" + struct.pack(">II", 0x00000100, 0) + struct.pack(">I", 0x80000000) \
        + finder + b"\0" * 6 + b"\0" * 6


def listing(c: RawClient, pattern: str):
    d = Open(c.tree, "")
    d.create(ImpersonationLevel.Impersonation, DirectoryAccessMask.FILE_LIST_DIRECTORY,
             0x10, SHARE_ALL, CreateDisposition.FILE_OPEN, CreateOptions.FILE_DIRECTORY_FILE)
    try:
        return d.query_directory(pattern, FileInformationClass.FILE_ID_BOTH_DIRECTORY_INFORMATION)
    finally:
        d.close()


def test_aapl_reply_names_the_capabilities_and_model(server):
    c = client(server, "mac")
    try:
        reply = negotiate_aapl(c)
    finally:
        c.close()
    command, _, bitmap, server_caps, volume_caps = struct.unpack_from("<IIQQQ", reply)
    assert (command, bitmap) == (1, 7)
    assert server_caps == AAPL_UNIX_BASED | AAPL_READ_DIR_ATTR | AAPL_COPYFILE | AAPL_NFS_ACE
    assert volume_caps == 0  # case-insensitive names, no Time Machine
    length = struct.unpack_from("<I", reply, 36)[0]
    assert reply[40:40 + length].decode("utf-16-le") == MODEL


def test_listing_carries_fork_size_finder_info_and_mode(server):
    c = client(server, "mac")
    try:
        write_stream(c, "photo.jpg", b"jpeg bytes")
        write_stream(c, "photo.jpg:AFP_AfpInfo", afp_info(b"JPEGprvw"))
        write_stream(c, "photo.jpg:AFP_Resource", b"rsrc!")
        os.chmod(server.mac / "photo.jpg", 0o640)
        plain = listing(c, "photo.jpg")[0]
        negotiate_aapl(c)
        mac = listing(c, "photo.jpg")[0]
    finally:
        c.close()
    # Before AAPL: an 8.3 short name, the EA size.
    assert plain["short_name"].get_value().decode("utf-16-le") == "PHOTO.JPG" or \
        plain["short_name_length"].get_value() == 0
    assert plain["reserved2"].get_value() == 0
    # After: ShortName holds the fork size and Finder info, Reserved2 the mode.
    assert mac["file_name"].get_value().decode("utf-16-le") == "photo.jpg"
    assert mac["short_name_length"].get_value() == 24
    packed = mac["short_name"].get_value()
    assert struct.unpack_from("<Q", packed)[0] == len(b"rsrc!")
    assert packed[8:16] == b"JPEGprvw"
    assert mac["reserved2"].get_value() == 0o100640
    assert mac["ea_size"].get_value() & FilePipePrinterAccessMask.FILE_READ_DATA


def nfs_aces(dacl: bytes) -> dict[int, int]:
    """{kind: value} of the S-1-5-88-kind-value ACEs of a DACL."""
    found, pos = {}, 8
    for _ in range(struct.unpack_from("<H", dacl, 4)[0]):
        size = struct.unpack_from("<H", dacl, pos + 2)[0]
        sid = dacl[pos + 8:pos + size]
        if sid[1] == 3 and sid[2:8] == b"\0\0\0\0\0\x05" and \
                struct.unpack_from("<I", sid, 8)[0] == 88:
            kind, value = struct.unpack_from("<II", sid, 12)
            found[kind] = value
        pos += size
    return found


def test_the_unix_mode_reads_and_sets_as_an_nfs_ace(server):
    (server.mac / "script.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(server.mac / "script.sh", 0o644)
    c = client(server, "mac")
    try:
        access = FilePipePrinterAccessMask.READ_CONTROL | FilePipePrinterAccessMask.WRITE_DAC
        f = c.open("script.sh", access)
        assert nfs_aces(dacl_of(c.query_sd(f, DACL))) == {}  # not before AAPL
        negotiate_aapl(c)
        st = os.stat(server.mac / "script.sh")
        assert nfs_aces(dacl_of(c.query_sd(f, DACL))) == {1: st.st_uid, 2: st.st_gid,
                                                           3: st.st_mode}
        # Finder's "Get Info" makes it executable: only the mode ACE.
        mode_ace_sid = bytes([1, 3, 0, 0, 0, 0, 0, 5]) + struct.pack("<III", 88, 3, 0o755)
        ace = struct.pack("<BBHI", 1, 0, 8 + len(mode_ace_sid), 0) + mode_ace_sid
        dacl = struct.pack("<BBHHH", 2, 0, 8 + len(ace), 1, 0) + ace
        before = dacl_of(c.query_sd(f, DACL))
        c.set_sd(f, DACL, struct.pack("<BBHIIII", 1, 0, 0x8004, 0, 0, 0, 20) + dacl)
        assert os.stat(server.mac / "script.sh").st_mode & 0o777 == 0o755
        # The stored DACL is untouched, and no NFS ACE was stored.
        assert dacl_of(c.query_sd(f, DACL)).replace(
            struct.pack("<I", 0o100755), struct.pack("<I", 0o100644)) == before
        assert not any(n.startswith("user.") and b"\x58\x00\x00\x00" in os.getxattr(
            server.mac / "script.sh", n) for n in os.listxattr(server.mac / "script.sh"))
        f.close()
    finally:
        c.close()


def test_a_time_machine_share_is_its_cap_less_the_backups(server):
    c = client(server, "tm")
    try:
        volume_caps = struct.unpack_from("<Q", negotiate_aapl(c), 24)[0]
        root = Open(c.tree, "")
        root.create(ImpersonationLevel.Impersonation,
                    FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES, 0x10, SHARE_ALL,
                    CreateDisposition.FILE_OPEN, CreateOptions.FILE_DIRECTORY_FILE)
        from smbprotocol.open import SMB2QueryInfoRequest, SMB2QueryInfoResponse
        req = SMB2QueryInfoRequest()
        req["info_type"] = 2  # SMB2_0_INFO_FILESYSTEM
        req["file_info_class"] = 3  # FileFsSizeInformation
        req["output_buffer_length"] = 24
        req["file_id"] = root.file_id
        resp = SMB2QueryInfoResponse()
        resp.unpack(c._send(req)["data"].get_value())
        total, avail, sectors, sector_bytes = struct.unpack("<QQII", resp["buffer"].get_value())
        root.close()
    finally:
        c.close()
    assert volume_caps & 4  # FULL_SYNC: a Time Machine destination
    unit = sectors * sector_bytes
    assert total * unit == TM_CAP
    assert avail * unit == TM_CAP - 3 * BAND


def test_a_bad_time_machine_size_is_one_clear_line(server, tmp_path):
    line = servers.config_error(tmp_path, f'[[share]]\nname = "x"\npath = "{server.tm}"\n'
                                          'time_machine = true\n'
                                          'time_machine_max_size = "lots"\n')
    assert "time_machine_max_size" in line and "\"2T\"" in line, line
