"""The Linux kernel's SMB3 client (cifs.ko) as a test client.

This machine has no cifs module of its own, so the client runs in a small
virtual machine: Debian's kernel package (the version `linux-image-amd64`
names), booted by qemu under software emulation with a busybox initramfs
that loads cifs.ko and the virtio network driver, runs a shell script and
powers off. The VM's network card is a tap device inside a network
namespace of the test's own, where Braid listens on addresses from the
benchmarking range (198.18.0.0/15) that nothing else on the machine uses.

    python3 tests/e2e/kernel_vm.py prepare    # download and unpack the kernel (scripts/test.sh)

The kernel is unpacked once into target/kernel-client/ and reused.
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
               "kernel/drivers/virtio")
GUEST_ADDRESS = "198.18.0.2"
PREFIX = 24

INIT = """#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in virtio_pci virtio_net cifs; do modprobe $m || echo "@@ modprobe-failed $m"; done
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
    for d in sorted(CACHE.glob("*/vmlinuz")):
        version = d.parent.name
        return Kernel(version, d, d.parent / "lib" / "modules" / version)
    return None


def prepare() -> Kernel:
    """The kernel, downloaded and unpacked on first use (a 70 MB package)."""
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


def build_initrd(kernel: Kernel, guest_script: str, out: Path) -> Path:
    """A gzipped newc cpio: busybox, the modules, /init, /guest-test.sh."""
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
        init.write_text(INIT.format(guest=GUEST_ADDRESS, prefix=PREFIX))
        init.chmod(0o755)
        (root / "guest-test.sh").write_text(guest_script)
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


def main() -> int:
    if sys.argv[1:] != ["prepare"]:
        print(__doc__)
        return 2
    kernel = prepare()
    print(f"kernel client: Linux {kernel.version} in {kernel.vmlinuz.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
