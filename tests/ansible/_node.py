"""Throwaway stand-in nodes for the Ansible tests, reached over SSH like a real Atlas node.

Why this exists: ansible-core ships no chroot connection (community.general is not installed), and a
`local` connection inside a chroot would need Ansible inside the root. A real sshd running inside a copy of
the cached debootstrap root exercises the exact path used in production (the ssh connection, sudo,
Python discovery on the target). Each node is a copy-on-write overlay of the cached root in a private
mount and PID namespace: the cache is never written, writes land in the node's own upper directory (which
the tests inspect), and killing the namespace's parent tears down sshd and every mount at once. sshd
listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

STANDIN_DIR = Path(__file__).resolve().parent / "standin"
HOSTNAME = "atlas-standin"

# Paths sshd, the shell and Ansible itself write on every connection; they say nothing about what the
# playbook changed on the node.
EPHEMERAL = (
    "root/.ansible",
    "root/.ssh",
    "tmp",
    "run",
    "var/log/lastlog",
    "var/log/wtmp",
    "var/log/btmp",
    "etc/ascend-standin",
    "usr/bin/lspci",
    "var/lib/sudo",
    # apt's binary caches, derived from dpkg's status: python-apt (the apt module, also in check mode)
    # regenerates them when missing, as they are in the cached root; that changes nothing installed.
    "var/cache/apt/pkgcache.bin",
    "var/cache/apt/srcpkgcache.bin",
    # Seeded by start_node itself.
    "etc/hosts",
    "etc/hostname",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def npu_conf(
    *, npu_count: int, health: list[str] | None, processes: list[str] | None = None, container_column: bool = False
) -> str:
    """Text of /etc/ascend-standin/npu.conf, read by the stand-in lspci and npu-smi (pure). `processes`:
    "<npu>,<chip>,<pid>,<name>,<memory MB>" rows of npu-smi's process table; `container_column`: the wider
    table of newer drivers."""
    lines = [f"NPU_COUNT={npu_count}"]
    if health:
        lines.append(f"NPU_HEALTH={shlex.quote(' '.join(health))}")
    if processes:
        lines.append(f"NPU_PROCS={shlex.quote(' '.join(processes))}")
    if container_column:
        lines.append("NPU_PROC_CONTAINER_COLUMN=1")
    return "\n".join(lines) + "\n"


@dataclass
class Node:
    """One running stand-in node."""

    lower: Path
    workdir: Path
    port: int
    key: Path
    process: subprocess.Popen[bytes]

    @property
    def upper(self) -> Path:
        return self.workdir / "upper"

    def path(self, inside: str) -> Path | None:
        """Where a path of the node's merged view lives on this machine, or None if it does not exist."""
        relative = inside.lstrip("/")
        for base in (self.upper, self.lower):
            candidate = base / relative
            if candidate.is_symlink() or candidate.exists():
                if base is self.upper and candidate.is_char_device() and os.stat(candidate).st_rdev == 0:
                    return None  # overlayfs whiteout: deleted on the node
                return candidate
        return None

    def read(self, inside: str) -> str:
        found = self.path(inside)
        if found is None:
            raise FileNotFoundError(inside)
        return found.read_text()

    def exists(self, inside: str) -> bool:
        return self.path(inside) is not None

    def written(self) -> dict[str, str]:
        """What the node's processes created or modified, minus connection noise: path -> a signature
        (modification time and size for files, link target for symlinks) so a rewrite shows up too."""
        out: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(self.upper):
            rel_dir = os.path.relpath(dirpath, self.upper)
            for name in dirnames + filenames:
                rel = os.path.normpath(os.path.join(rel_dir, name))
                if any(rel == e or rel.startswith(e + "/") for e in EPHEMERAL):
                    continue
                full = Path(dirpath) / name
                if full.is_symlink():
                    out[rel] = "-> " + os.readlink(full)
                elif full.is_dir():
                    if not (self.lower / rel).is_dir():
                        out[rel] = "dir"
                    # else: a directory overlayfs copied up to hold an entry listed on its own
                else:
                    st = full.lstat()
                    out[rel] = f"{st.st_mtime_ns}:{st.st_size}"
        return out

    def install_log(self) -> list[dict[str, str]]:
        """Entries the stand-in installers appended to the vendor's install log, oldest first."""
        try:
            text = self.read("/var/log/ascend_seclog/ascend_install.log")
        except FileNotFoundError:
            return []
        entries = []
        for line in text.splitlines():
            fields = dict(part.split("=", 1) for part in line.split()[2:] if "=" in part)
            entries.append(fields)
        return entries

    def stop(self) -> None:
        # unshare ignores SIGTERM while it waits; SIGKILL makes the kernel kill its child (sshd, PID 1 of
        # the namespace, via --kill-child), which takes the namespace and its mounts with it.
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)


def start_node(
    *,
    lower: Path,
    workdir: Path,
    key: Path,
    npu_count: int = 8,
    health: list[str] | None = None,
    extra_files: dict[str, str] | None = None,
) -> Node:
    """Boot a node: overlay on `lower`, stand-in lspci and NPU config, root's authorized key, sshd."""
    upper, work, merged = workdir / "upper", workdir / "work", workdir / "merged"
    for d in (upper, work, merged):
        d.mkdir(parents=True)
    seeds = {
        "root/.ssh/authorized_keys": key.with_suffix(".pub").read_text(),
        "etc/ascend-standin/npu.conf": npu_conf(npu_count=npu_count, health=health),
        "usr/bin/lspci": (STANDIN_DIR / "lspci").read_text(),
        # The node has its own UTS namespace and host name; resolving it must never leave the machine
        # (sudo looks it up on every call).
        "etc/hostname": f"{HOSTNAME}\n",
        "etc/hosts": f"127.0.0.1 localhost\n127.0.1.1 {HOSTNAME}\n",
    }
    seeds.update({k.lstrip("/"): v for k, v in (extra_files or {}).items()})
    for rel, text in seeds.items():
        target = upper / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (upper / "root").chmod(0o700)
    (upper / "root/.ssh").chmod(0o700)
    (upper / "root/.ssh/authorized_keys").chmod(0o600)
    (upper / "usr/bin/lspci").chmod(0o755)
    for rel, text in seeds.items():
        if text.startswith("#!"):  # a seeded tool (e.g. the npu-smi of an installed driver)
            (upper / rel).chmod(0o755)
    port = free_port()
    boot = "\n".join(
        [
            "set -e",
            f"hostname {HOSTNAME}",
            f"mount -t overlay overlay -o lowerdir={lower},upperdir={upper},workdir={work} {merged}",
            f"mount -t proc proc {merged}/proc",
            f"mount -t devpts devpts -o newinstance,ptmxmode=0666,mode=620 {merged}/dev/pts",
            f"mount -t tmpfs -o mode=0755 tmpfs {merged}/run",
            f"mkdir -p {merged}/run/sshd",
            f"exec chroot {merged} /usr/sbin/sshd -D -e -p {port} -o ListenAddress=127.0.0.1",
        ]
    )
    log = (workdir / "sshd.log").open("wb")
    process = subprocess.Popen(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--pid",
            "--fork",
            "--kill-child",
            "--",
            "/bin/sh",
            "-c",
            boot,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    node = Node(lower=lower, workdir=workdir, port=port, key=key, process=process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited: {(workdir / 'sshd.log').read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return node
        except OSError:
            time.sleep(0.2)
    node.stop()
    raise RuntimeError(f"sshd did not listen on {port}: {(workdir / 'sshd.log').read_text()}")
