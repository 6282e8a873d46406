"""End-to-end tests with the independent Python SMB 3 client `smbprotocol`.

Its high-level `smbclient` module is used over a signed session and over an
encrypted one, each with its own connection cache.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

import pytest
import smbclient
from smbprotocol.exceptions import SMBOSError
from smbprotocol.header import NtStatus

import servers
from smbremote import Remote


@pytest.fixture(params=["signed", "encrypted"])
def remote(request, smb_server, remote_dir):
    r = Remote(smb_server, remote_dir, encrypt=request.param == "encrypted")
    yield r
    r.close()


def ntstatus_of(excinfo) -> int:
    return excinfo.value.ntstatus


def test_session_is_signed_or_encrypted(remote):
    if remote.encrypt:
        assert remote.session.encrypt_data
    else:
        assert remote.session.signing_required and not remote.session.encrypt_data
    remote.write("x", b"secret")
    assert remote.read("x") == b"secret"


def test_mkdir_and_listdir(remote):
    smbclient.mkdir(remote.path("alpha"), **remote.kw)
    smbclient.makedirs(remote.path("beta", "gamma", "delta"), **remote.kw)
    remote.write("file.txt", b"contents")

    assert sorted(smbclient.listdir(remote.path(), **remote.kw)) == ["alpha", "beta", "file.txt"]
    assert smbclient.listdir(remote.path("beta"), **remote.kw) == ["gamma"]
    assert smbclient.listdir(remote.path("alpha"), **remote.kw) == []
    assert remote.local("beta", "gamma", "delta").is_dir()


def test_write_and_read_back_several_mib(remote):
    data = os.urandom(6 * 2**20 + 333)
    remote.write("big.bin", data)

    assert hashlib.sha256(remote.local("big.bin").read_bytes()).digest() == \
        hashlib.sha256(data).digest()
    assert hashlib.sha256(remote.read("big.bin")).digest() == hashlib.sha256(data).digest()


def test_read_at_offsets_and_past_end(remote):
    data = os.urandom(3 * 2**20)
    remote.write("f.bin", data)
    with smbclient.open_file(remote.path("f.bin"), mode="rb", **remote.kw) as f:
        f.seek(2**20 + 17)
        assert f.read(100_000) == data[2**20 + 17:2**20 + 17 + 100_000]
        f.seek(len(data) - 10)
        assert f.read(1000) == data[-10:]
        assert f.read(1000) == b""


def test_overwrite_in_the_middle_and_append(remote):
    remote.write("f", b"0123456789")
    with smbclient.open_file(remote.path("f"), mode="r+b", **remote.kw) as f:
        f.seek(3)
        f.write(b"abc")
    with smbclient.open_file(remote.path("f"), mode="ab", **remote.kw) as f:
        f.write(b"XYZ")
    assert remote.read("f") == b"012abc6789XYZ"
    assert remote.local("f").read_bytes() == b"012abc6789XYZ"


def test_large_aligned_writes_mixed_with_small_overwrites(remote):
    """Large aligned WRITEs go to the disk directly (direct_writes, Braid's
    default), small and unaligned ones through the page cache: what the
    client reads back, and the file on the server, are the bytes in the
    order they were written either way."""
    mib = 2**20
    expect = bytearray(os.urandom(4 * mib))
    remote.write("mixed.bin", bytes(expect))
    with smbclient.open_file(remote.path("mixed.bin"), mode="r+b", **remote.kw) as f:
        for offset, size in [(mib + 5, 300), (2 * mib, 4096), (3 * mib - 7, 70_000)]:
            patch = os.urandom(size)
            f.seek(offset)
            f.write(patch)
            expect[offset:offset + size] = patch
            # A large aligned write over what was just patched.
            block = os.urandom(mib)
            f.seek(2 * mib)
            f.write(block)
            expect[2 * mib:3 * mib] = block
            f.flush()
            f.seek(0)
            assert f.read() == bytes(expect)
    assert remote.read("mixed.bin") == bytes(expect)
    assert remote.local("mixed.bin").read_bytes() == bytes(expect)


def test_stat_sizes_and_types(remote):
    sizes = {"zero": 0, "one": 1, "block": 65536, "odd": 1_000_001}
    for name, size in sizes.items():
        remote.write(name, os.urandom(size))
    smbclient.mkdir(remote.path("dir"), **remote.kw)

    for name, size in sizes.items():
        st = smbclient.stat(remote.path(name), **remote.kw)
        assert st.st_size == size, name
        assert stat.S_ISREG(st.st_mode), name
    assert stat.S_ISDIR(smbclient.stat(remote.path("dir"), **remote.kw).st_mode)


def test_rename_file_and_directory(remote):
    remote.write("old.txt", b"payload")
    smbclient.mkdir(remote.path("olddir"), **remote.kw)
    remote.write("olddir\\inner", b"inner")

    smbclient.rename(remote.path("old.txt"), remote.path("new.txt"), **remote.kw)
    smbclient.rename(remote.path("olddir"), remote.path("newdir"), **remote.kw)

    assert sorted(smbclient.listdir(remote.path(), **remote.kw)) == ["new.txt", "newdir"]
    assert remote.read("new.txt") == b"payload"
    assert remote.read("newdir\\inner") == b"inner"
    with pytest.raises(SMBOSError) as e:
        smbclient.stat(remote.path("old.txt"), **remote.kw)
    assert ntstatus_of(e) == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND


def test_remove_file_and_empty_directory(remote):
    remote.write("doomed", b"x")
    smbclient.mkdir(remote.path("emptydir"), **remote.kw)

    smbclient.remove(remote.path("doomed"), **remote.kw)
    smbclient.rmdir(remote.path("emptydir"), **remote.kw)

    assert smbclient.listdir(remote.path(), **remote.kw) == []
    assert not remote.local("doomed").exists()
    assert not remote.local("emptydir").exists()


def test_listing_of_1200_entries(remote, smb_server):
    # Names of varied length so that the listing spans many response buffers.
    names = {f"entry-{i:04d}-" + "x" * (i % 97) for i in range(1200)}
    base = remote.local()
    for name in names:
        (base / name).write_bytes(name.encode()[: 1 + len(name) % 7])
    servers.give_to_share_owner(smb_server.share_dir, base)

    listed = smbclient.listdir(remote.path(), **remote.kw)
    assert len(listed) == len(names)
    assert set(listed) == names

    # The sizes that came with the directory entries (FileIdFullDirectoryInformation).
    sizes = {e.name: e.smb_info.end_of_file
             for e in smbclient.scandir(remote.path(), **remote.kw)}
    assert sizes == {name: 1 + len(name) % 7 for name in names}


def test_unicode_names(remote):
    name = "héllo wörld ✓ 日本.txt"
    remote.write(name, b"unicode")
    assert smbclient.listdir(remote.path(), **remote.kw) == [name]
    assert remote.local(name).read_bytes() == b"unicode"


def test_open_missing_file_fails(remote):
    with pytest.raises(SMBOSError) as e:
        smbclient.open_file(remote.path("missing.bin"), mode="rb", **remote.kw)
    assert ntstatus_of(e) == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    assert e.value.errno == errno.ENOENT

    with pytest.raises(SMBOSError) as e:
        smbclient.remove(remote.path("missing.bin"), **remote.kw)
    assert ntstatus_of(e) == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND


def test_missing_parent_directory_fails(remote):
    with pytest.raises(SMBOSError) as e:
        smbclient.open_file(remote.path("nodir", "file"), mode="wb", **remote.kw)
    assert ntstatus_of(e) == NtStatus.STATUS_OBJECT_PATH_NOT_FOUND
    assert not remote.local("nodir").exists()


def test_exclusive_create_of_existing_file_fails(remote):
    remote.write("exists", b"original")
    with pytest.raises(SMBOSError) as e:
        smbclient.open_file(remote.path("exists"), mode="xb", **remote.kw)
    assert ntstatus_of(e) == NtStatus.STATUS_OBJECT_NAME_COLLISION
    assert remote.read("exists") == b"original"


def test_rmdir_of_non_empty_directory_fails(remote):
    smbclient.mkdir(remote.path("full"), **remote.kw)
    remote.write("full\\file", b"x")
    with pytest.raises(SMBOSError) as e:
        smbclient.rmdir(remote.path("full"), **remote.kw)
    assert ntstatus_of(e) == NtStatus.STATUS_DIRECTORY_NOT_EMPTY
    assert remote.read("full\\file") == b"x"


def test_a_write_ending_beyond_maxfilesize_is_invalid(smb_server, remote_dir):
    """MS-FSA 2.1.5.3: no byte may be written at or beyond MAXFILESIZE
    (0xFFFFFFF0000, 16 TiB - 64 KiB), whatever the host file system allows;
    an empty write there is fine (as Windows and Samba answer)."""
    from smbprotocol.exceptions import SMBResponseException
    from smbprotocol.open import CreateDisposition

    from smbremote import FILE_ALL_ACCESS, RawClient

    maxfilesize = 0xFFFFFFF0000
    c = RawClient(smb_server)
    try:
        op = c.open(f"{remote_dir}\\huge", FILE_ALL_ACCESS, CreateDisposition.FILE_CREATE)
        with pytest.raises(SMBResponseException) as e:
            op.write(b"x", maxfilesize)
        assert e.value.status == NtStatus.STATUS_INVALID_PARAMETER
        with pytest.raises(SMBResponseException) as e:
            op.write(b"xy", maxfilesize - 1)
        assert e.value.status == NtStatus.STATUS_INVALID_PARAMETER
        assert op.write(b"", maxfilesize) == 0
        assert op.write(b"end", 4096) == 3
        op.close(False)
    finally:
        c.close()
