"""Named streams (NTFS alternate data streams, `file.txt:stream:$DATA`) through
the independent Python SMB 3 client `smbprotocol`.

Braid keeps stream NAME of a file in its xattr `user.DosStream.NAME:$DATA`
(data plus one NUL), as Samba's vfs_streams_xattr does. Against Samba
(BRAID_E2E_TARGET=samba) the tests are skipped when the share refuses stream
names (OBJECT_NAME_INVALID): the private Samba config of servers.py loads no
streams_xattr module.
"""

from __future__ import annotations

import os

import pytest
import smbclient
from smbclient._io import SMBRawIO
from smbprotocol.exceptions import SMBOSError
from smbprotocol.header import NtStatus
from smbprotocol.open import CreateOptions, FilePipePrinterAccessMask

import smbremote

TARGET = os.environ.get("BRAID_E2E_TARGET", "braid")


class Remote(smbremote.Remote):
    def streams(self, name: str) -> dict[str, int]:
        return {s.name: s.size for s in smbclient.liststreams(self.path(name), **self.kw)}


@pytest.fixture
def remote(smb_server, remote_dir):
    r = Remote(smb_server, remote_dir)
    try:
        r.write("probe.txt:probe", b"")
    except SMBOSError as e:
        r.close()
        # Braid always has named streams: there, a refusal is a regression.
        if TARGET != "samba" or e.ntstatus != NtStatus.STATUS_OBJECT_NAME_INVALID:
            raise
        pytest.skip(f"{TARGET} share has no named streams "
                    "(Samba's test config has no streams_xattr module)")
    smbclient.remove(r.path("probe.txt"), **r.kw)
    yield r
    r.close()


def status_of(excinfo) -> int:
    return excinfo.value.ntstatus


def test_stream_data_round_trips_and_leaves_the_file_alone(remote):
    remote.write("f.txt", b"main data")
    payload = os.urandom(1500) + b"\x00 tail"
    remote.write("f.txt:s1", payload)

    assert remote.read("f.txt:s1") == payload
    assert remote.read("f.txt:s1:$DATA") == payload
    # Stream names compare without regard to case.
    assert remote.read("f.txt:S1") == payload
    assert remote.read("f.txt") == b"main data"
    assert remote.read("f.txt::$DATA") == b"main data"
    assert remote.local("f.txt").read_bytes() == b"main data"
    # Listings show the file, never its streams.
    assert smbclient.listdir(remote.path(), **remote.kw) == ["f.txt"]


def test_stream_list(remote):
    remote.write("f.txt", b"12345")
    remote.write("f.txt:alpha", b"abc")
    remote.write("f.txt:Second Stream", b"")

    assert remote.streams("f.txt") == {
        "::$DATA": 5,
        ":alpha:$DATA": 3,
        ":Second Stream:$DATA": 0,
    }
    if TARGET == "braid":
        # Samba's vfs_streams_xattr format: the data and one NUL.
        assert os.getxattr(remote.local("f.txt"), "user.DosStream.alpha:$DATA") == b"abc\x00"


def test_stream_of_missing_file_creates_the_file(remote):
    remote.write("new.txt:s", b"x")
    assert remote.read("new.txt") == b""
    assert remote.streams("new.txt") == {"::$DATA": 0, ":s:$DATA": 1}


def test_delete_on_close_of_a_stream_removes_only_it(remote):
    remote.write("f.txt", b"keep me")
    remote.write("f.txt:gone", b"1")
    remote.write("f.txt:kept", b"2")

    # mode "rb": an open of the existing stream (FILE_OPEN).
    raw = SMBRawIO(remote.path("f.txt:gone"), mode="rb", share_access="rwd",
                   desired_access=FilePipePrinterAccessMask.DELETE
                   | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES,
                   create_options=CreateOptions.FILE_DELETE_ON_CLOSE, **remote.kw)
    raw.open()
    raw.close()

    assert remote.streams("f.txt") == {"::$DATA": 7, ":kept:$DATA": 1}
    assert remote.read("f.txt") == b"keep me"
    with pytest.raises(SMBOSError) as e:
        remote.read("f.txt:gone")
    assert status_of(e) == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND


@pytest.mark.parametrize("name", [
    "f.txt:a/b",            # a path separator in the stream name
    "f.txt:s\\x",            # ... or a backslash
    "f.txt:s:$FOO",         # a stream type other than $DATA
    "f.txt:s:",             # an empty stream type
    "f.txt:",               # an empty stream name
    "f.txt:a:b:$DATA",      # a third colon
    "f.txt:" + "x" * 256,   # longer than NTFS allows
])
def test_stream_names_that_try_to_escape_are_refused(remote, name):
    remote.write("f.txt", b"data")
    with pytest.raises(SMBOSError) as e:
        remote.write(name, b"evil")
    assert status_of(e) in (NtStatus.STATUS_OBJECT_NAME_INVALID,
                            NtStatus.STATUS_INVALID_PARAMETER,
                            NtStatus.STATUS_OBJECT_PATH_NOT_FOUND)
    assert remote.streams("f.txt") == {"::$DATA": 4}
    if TARGET == "braid":
        names = os.listxattr(remote.local("f.txt"))
        assert not [n for n in names if n.startswith("user.DosStream.")]


def test_stream_named_like_braids_own_xattr_stays_a_stream(remote):
    """A stream called "braid.dos" is user.DosStream.braid.dos:$DATA, never
    the user.braid.dos xattr that holds the file's DOS attributes."""
    remote.write("f.txt", b"data")
    remote.write("f.txt:braid.dos", b"not attributes")
    assert remote.read("f.txt:braid.dos") == b"not attributes"
    info = smbclient.stat(remote.path("f.txt"), **remote.kw)
    assert info.st_size == 4
    if TARGET == "braid":
        assert os.getxattr(remote.local("f.txt"), "user.DosStream.braid.dos:$DATA") == \
            b"not attributes\x00"
