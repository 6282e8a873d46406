"""The Linux kernel's SMB3 client (cifs.ko) and NFSv4.1 client (nfsv4.ko) as
test clients.

This machine has neither module of its own, so the client runs in a small
virtual machine: Debian's kernel package (the version `linux-image-amd64`
names), booted by qemu under software emulation with a busybox initramfs
that loads the client's modules (cifs.ko, or nfsv4.ko) and the virtio
network driver, runs a shell script and powers off. The VM's network card is a tap device inside a network
namespace of the test's own, where Braid listens on addresses from the
benchmarking range (198.18.0.0/15) that nothing else on the machine uses.

    python3 tests/e2e/kernel_vm.py prepare    # download and unpack the kernel (scripts/test.sh)

The kernel is unpacked once into target/kernel-client/ and reused; a tree
unpacked with fewer module directories than MODULE_DIRS names (before the
NFS client's were added) is unpacked again.

run_nfs_script() boots the VM once with a script that has an NFSv4 export
mounted (`mount -i -t nfs4 -o vers=...,port=N HOST:/PATH /mnt`) and returns
the console's lines.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "target" / "kernel-client"
BUSYBOX = Path("/bin/busybox")
QEMU = "qemu-system-x86_64"
META_PACKAGE = "linux-image-amd64"
# What the initramfs needs of the kernel's modules: the SMB client and what
# it loads (netfs, fscache, dns_resolver, the NLS tables), the ciphers and
# hashes SMB3 asks the crypto API for, and the virtio network card.
MODULE_DIRS = ("kernel/crypto", "kernel/arch/x86/crypto", "kernel/lib", "kernel/fs/smb",
               "kernel/fs/netfs", "kernel/fs/fscache", "kernel/fs/nls",
               "kernel/net/dns_resolver", "kernel/net/core/failover.ko",
               "kernel/drivers/net/virtio_net.ko", "kernel/drivers/net/net_failover.ko",
               "kernel/drivers/virtio",
               # The NFSv4 client: nfsv4 pulls nfs, lockd, sunrpc, grace
               # (nfs_common), fscache, netfs and dns_resolver.
               "kernel/net/sunrpc", "kernel/fs/nfs", "kernel/fs/lockd",
               "kernel/fs/nfs_common")
# Written into an unpacked tree: the MODULE_DIRS it was unpacked with.
DIRS_STAMP = "module-dirs.txt"
GUEST_ADDRESS = "198.18.0.2"
PREFIX = 24

INIT = """#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in virtio_pci virtio_net {modules}; do modprobe $m || echo "@@ modprobe-failed $m"; done
ip link set lo up
ip link set eth0 up
ip addr add {guest}/{prefix} dev eth0
echo "@@ guest-up $(uname -r)"
sh /guest-test.sh
echo "@@ guest-done $?"
poweroff -f
"""


class Kernel(NamedTuple):
    version: str
    vmlinuz: Path
    modules: Path  # the lib/modules/<version> tree the initramfs copies


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def _kernel_package() -> str:
    """The versioned kernel package Debian's meta package depends on."""
    for attempt in range(2):
        out = subprocess.run(["apt-cache", "depends", META_PACKAGE], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("Depends: linux-image-"):
                return line.split(": ", 1)[1]
        if attempt == 0:
            _run(["apt-get", "update", "-qq"])
    raise RuntimeError(f"apt-cache knows no {META_PACKAGE}")


def cached() -> Kernel | None:
    """The unpacked kernel, if it holds every directory of MODULE_DIRS."""
    for d in sorted(CACHE.glob("*/vmlinuz")):
        stamp = d.parent / DIRS_STAMP
        if not stamp.exists() or stamp.read_text().split() != list(MODULE_DIRS):
            continue
        version = d.parent.name
        return Kernel(version, d, d.parent / "lib" / "modules" / version)
    return None


def prepare() -> Kernel:
    """The kernel, downloaded and unpacked on first use (a 70 MB package),
    and again when MODULE_DIRS has grown since."""
    have = cached()
    if have is not None:
        return have
    package = _kernel_package()
    version = package.removeprefix("linux-image-")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        _run(["apt-get", "download", package], cwd=tmp)
        deb = next(Path(tmp).glob("*.deb"))
        unpacked = Path(tmp) / "root"
        _run(["dpkg-deb", "-x", str(deb), str(unpacked)])
        dest = CACHE / (version + ".partial")
        shutil.rmtree(dest, ignore_errors=True)
        src_modules = unpacked / "lib" / "modules" / version
        modules = dest / "lib" / "modules" / version
        for rel in MODULE_DIRS:
            src = src_modules / rel
            if src.is_dir():
                shutil.copytree(src, modules / rel)
            elif src.exists():
                (modules / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, modules / rel)
        for name in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
            if (src_modules / name).exists():
                shutil.copy2(src_modules / name, modules / name)
        _run([str(BUSYBOX), "depmod", "-b", str(dest), version])
        shutil.copy2(unpacked / "boot" / f"vmlinuz-{version}", dest / "vmlinuz")
        (dest / DIRS_STAMP).write_text("\n".join(MODULE_DIRS) + "\n")
        # An older tree of the same version (fewer modules) gives way.
        shutil.rmtree(CACHE / version, ignore_errors=True)
        dest.rename(CACHE / version)
    kernel = cached()
    assert kernel is not None
    return kernel


def missing_tools() -> str | None:
    """Why the kernel client cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespace, tap device)"
    for tool in (QEMU, "ip"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (scripts/test.sh installs it)"
    # The initramfs has no C library: busybox must be the static build.
    if not BUSYBOX.exists() or subprocess.run(["ldd", str(BUSYBOX)],
                                              capture_output=True).returncode == 0:
        return "busybox-static not installed (scripts/test.sh installs it)"
    return None


def build_initrd(kernel: Kernel, guest_script: str, out: Path,
                 modules: tuple[str, ...] = ("cifs",),
                 files: dict[str, Path] | None = None) -> Path:
    """A gzipped newc cpio: busybox, the modules, /init (which loads
    `modules` and what they need), /guest-test.sh, and `files` (path in
    the VM: file on the host, copied with its mode)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("bin", "sbin", "proc", "sys", "dev", "mnt", "mnt2", "tmp"):
            (root / d).mkdir()
        shutil.copy2(BUSYBOX, root / "bin" / "busybox")
        applets = _run([str(BUSYBOX), "--list"]).stdout.split()
        for applet in applets:
            if applet != "busybox":
                (root / "bin" / applet).symlink_to("busybox")
        (root / "sbin" / "modprobe").symlink_to("../bin/busybox")
        shutil.copytree(kernel.modules, root / "lib" / "modules" / kernel.version)
        init = root / "init"
        init.write_text(INIT.format(guest=GUEST_ADDRESS, prefix=PREFIX,
                                    modules=" ".join(modules)))
        init.chmod(0o755)
        (root / "guest-test.sh").write_text(guest_script)
        for inside, source in (files or {}).items():
            dest = root / inside.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
        names = subprocess.run(["find", "."], cwd=root, check=True, capture_output=True).stdout
        archive = subprocess.run([str(BUSYBOX), "cpio", "-o", "-H", "newc"], cwd=root,
                                 input=names, check=True, capture_output=True).stdout
    out.write_bytes(gzip.compress(archive, compresslevel=1))
    return out


class NetNs:
    """A network namespace holding a tap device with the server's addresses."""

    def __init__(self, addresses: list[str]):
        self.name = f"braidk{os.getpid()}"
        self.tap = "tapbraid"
        self.addresses = addresses
        _run(["ip", "netns", "add", self.name])
        try:
            self.run(["ip", "link", "set", "lo", "up"])
            self.run(["ip", "tuntap", "add", self.tap, "mode", "tap"])
            for a in addresses:
                self.run(["ip", "addr", "add", f"{a}/{PREFIX}", "dev", self.tap])
            self.run(["ip", "link", "set", self.tap, "up"])
        except Exception:
            self.close()
            raise

    def argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        return _run(self.argv(argv), **kw)

    def close(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def boot(kernel: Kernel, initrd: Path, ns: NetNs, timeout: float) -> subprocess.Popen:
    """Start the VM (software emulation: this machine's KVM cannot run
    it); its console, kernel messages and the guest script's output, is
    the process's stdout."""
    argv = ns.argv([QEMU, "-accel", "tcg", "-cpu", "max", "-m", "512", "-smp", "1",
                    "-nographic", "-no-reboot", "-kernel", str(kernel.vmlinuz),
                    "-initrd", str(initrd),
                    "-append", "console=ttyS0 panic=-1 quiet loglevel=3",
                    "-netdev", f"tap,id=n0,ifname={ns.tap},script=no,downscript=no",
                    "-device", "virtio-net-pci,netdev=n0"])
    return subprocess.Popen(["timeout", "--kill-after=10", str(timeout), *argv],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True)


# ---- the NFSv4 client ---------------------------------------------------------

NFS_MODULES = ("nfsv4",)  # modprobe pulls nfs, lockd, sunrpc, grace, fscache, netfs
GO_PORT = 7777

# What every script run_nfs_script boots with: `ok NAME` and `fail NAME
# DETAIL` print the marker lines the tests assert on; `pause NAME` prints
# "@@ pause NAME" and waits until the host has looked (a TCP connection to
# GO_PORT from the host; see run_nfs_script's at_pause).
NFS_HELPERS = r"""
ok() {{ echo "OK $*"; }}
fail() {{ echo "FAIL $*"; }}
pause() {{ echo "@@ pause $1"; nc -l -p {go_port} < /dev/null > /dev/null || fail "pause-$1" no-go; }}
"""


def nfs_mount_command(server: str, port: int, path: str, mountpoint: str = "/mnt",
                      vers: str = "4.1", options: str = "nconnect=4") -> str:
    """busybox's mount of an NFSv4 export (no mount.nfs helper: -i). The
    version is always spelled out: the kernel's own default is 4.0, and
    the 4.2-then-4.1 fallback belongs to mount.nfs."""
    opts = f"vers={vers}" + (f",{options}" if options else "") + f",port={port}"
    return f"mount -i -t nfs4 -o {opts} {server}:{path} {mountpoint}"


def send_go(ns: NetNs, timeout: float = 60.0) -> None:
    """Let a paused guest go on: connect to the port it listens on."""
    ns.run([sys.executable, "-c", "import socket, sys, time\n"
            "for _ in range(200):\n"
            "    try:\n"
            "        socket.create_connection((sys.argv[1], int(sys.argv[2])), 5).close(); break\n"
            "    except OSError: time.sleep(0.1)\n"
            "else: sys.exit(1)",
            GUEST_ADDRESS, str(GO_PORT)], timeout=timeout)


def run_nfs_script(kernel: Kernel, ns: NetNs, script: str, workdir: Path, timeout: float,
                   files: dict[str, Path] | None = None, at_pause=None,
                   modules: tuple[str, ...] = NFS_MODULES) -> list[str]:
    """Boot the VM once with the NFS client's modules (or `modules`: the
    same ok/fail/pause script for cifs) and run `script`
    (NFS_HELPERS' functions defined first; mount with nfs_mount_command).
    At each `pause NAME` of the script, at_pause(NAME) runs on the host
    and then the guest goes on; an exception it raises is raised again
    once the VM is off. Returns the console's lines (kernel messages, the
    script's output, "@@ guest-done STATUS" last when it finished)."""
    initrd = build_initrd(kernel, NFS_HELPERS.format(go_port=GO_PORT) + script,
                          workdir / "initrd-nfs.gz", modules=modules, files=files)
    vm = boot(kernel, initrd, ns, timeout)
    lines: list[str] = []
    failure: BaseException | None = None
    try:
        assert vm.stdout is not None
        for line in vm.stdout:
            line = line.rstrip("\r\n")
            lines.append(line)
            if line.startswith("@@ pause "):
                try:
                    if at_pause is not None and failure is None:
                        at_pause(line.split()[2])
                except Exception as e:  # noqa: BLE001 - raised after the VM is off
                    failure = e
                finally:
                    send_go(ns)
        vm.wait(30)
    finally:
        if vm.poll() is None:
            vm.kill()
            try:
                os.killpg(vm.pid, 9)
            except ProcessLookupError:
                pass
            vm.wait(10)
    if failure is not None:
        raise failure
    return lines


def results_of(lines: list[str], host: dict[str, tuple[bool, str]]
               ) -> dict[str, tuple[bool, str]]:
    """The checks of a VM run: the host's own (`host`), then each guest
    line `OK name` or `FAIL name detail` (the first one of a name counts)."""
    results = dict(host)
    for line in lines:
        words = line.split(maxsplit=2)
        if len(words) >= 2 and words[0] in ("OK", "FAIL"):
            results.setdefault(words[1], (words[0] == "OK", words[2] if len(words) > 2 else ""))
    return results


def finished_problem(results: dict, lines: list[str], known: list[str]) -> str | None:
    """Why a VM run is not whole: the guest script did not reach
    `@@ checks-done`, or reported checks the test does not know."""
    if "@@ checks-done" not in lines:
        return "the guest script did not finish:\n" + "\n".join(lines[-60:])
    unknown = sorted(set(results) - set(known))
    return f"markers the test does not know: {unknown}" if unknown else None


def check_problem(results: dict, lines: list[str], base: Path, check: str) -> str | None:
    """Why `check` did not pass in a VM run (None: it passed)."""
    if check not in results:
        return (f"no marker for {check} (console in {base / 'console.log'}):\n"
                + "\n".join(lines[-40:]))
    ok, detail = results[check]
    failed = sorted(name for name, (good, _) in results.items() if not good)
    return None if ok else f"{check}: {detail} (all failed checks: {', '.join(failed)})"


def main() -> int:
    if sys.argv[1:] != ["prepare"]:
        print(__doc__)
        return 2
    kernel = prepare()
    print(f"kernel client: Linux {kernel.version} in {kernel.vmlinuz.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
