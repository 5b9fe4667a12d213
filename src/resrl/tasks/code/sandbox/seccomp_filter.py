"""The seccomp filter of the code sandbox, built with libseccomp (PyPI `pyseccomp`, a ctypes binding of
the system's libseccomp.so.2) and handed to bubblewrap as BPF (`bwrap --seccomp FD`).

A deny list, as Flatpak and Docker write theirs: everything a test program has no business doing and
that would let it reach past its item. Denied calls fail with EPERM (the program sees an ordinary
OSError); `clone3` fails with ENOSYS, so that the C library falls back to `clone`, whose flags a filter
can read. A system call of another ABI (i386 `int 0x80`, x32) kills the process (libseccomp's default
for a foreign architecture), so the list cannot be side-stepped through another syscall table.

| denied | why |
|---|---|
| keyctl, add_key, request_key | the kernel keyrings are per uid and outlive processes: a key left by one item could be read by the next |
| ptrace, process_vm_readv/writev, pidfd_getfd, kcmp | another process's memory or file descriptors (the harness's, the judge's) |
| unshare, setns, clone/clone3 with a namespace flag | a new user namespace grants capabilities inside it (mount, chroot) |
| mount, umount2, pivot_root, chroot, fsopen, fsconfig, fsmount, fspick, move_mount, open_tree, mount_setattr | reshaping the file system view (the chroot escape needs chroot) |
| bpf, perf_event_open, userfaultfd, io_uring_* | kernel attack surface; io_uring operations bypass the filter |
| open_by_handle_at, name_to_handle_at | opening host files by handle, past the mount namespace |
| kexec_*, *_module, reboot, swapon/off, acct, quotactl*, syslog, iopl, ioperm, settimeofday, clock_settime/adjtime, adjtimex, sethostname, setdomainname, vhangup, uselib, lookup_dcookie, nfsservctl, personality | administration of the machine |
| ioctl TIOCSTI / TIOCLINUX | typing into a terminal (there is none: `--new-session`; a second fence) |

`filter_bpf()` builds the program once per process (a few ms) and returns its bytes; `None` (with the
reason in `unavailable_reason()`) when pyseccomp or libseccomp is missing.
"""

from __future__ import annotations

import errno
import functools
import os

DENIED = (
    "keyctl", "add_key", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "unshare", "setns",
    "mount", "umount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "vhangup", "uselib", "lookup_dcookie", "nfsservctl", "personality",
)

# clone(2)'s namespace flags (linux/sched.h): any of them in clone's first argument is refused
CLONE_NS_FLAGS = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080,
}
TIOCSTI, TIOCLINUX = 0x5412, 0x541C

_REASON: list[str] = []


def unavailable_reason() -> str | None:
    """Why `filter_bpf()` returned None, if it did."""
    return _REASON[0] if _REASON else None


@functools.lru_cache(maxsize=1)
def filter_bpf() -> bytes | None:
    """The BPF program of the sandbox's seccomp filter, or None when it cannot be built here."""
    try:
        import pyseccomp as sc
    except ImportError as exc:  # the package (declared for Linux) is not installed
        _REASON.append(f"the Python package pyseccomp is not installed ({exc})")
        return None
    try:
        f = sc.SyscallFilter(sc.ALLOW)
        deny = sc.ERRNO(errno.EPERM)
        for name in DENIED:
            try:
                f.add_rule(deny, name)
            except (ValueError, RuntimeError, OSError):  # not a system call of this architecture
                continue
        for flag in CLONE_NS_FLAGS.values():
            f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags live in memory, out of a filter's reach
        for request in (TIOCSTI, TIOCLINUX):
            f.add_rule(deny, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
        fd = os.memfd_create("resrl-seccomp", os.MFD_CLOEXEC)
        try:
            f.export_bpf(_Fd(fd))
            size = os.lseek(fd, 0, os.SEEK_END)
            data = os.pread(fd, size, 0)
        finally:
            os.close(fd)
    except Exception as exc:  # noqa: BLE001 - libseccomp missing (OSError from ctypes) or refusing a rule
        _REASON.append(f"libseccomp could not build the filter ({type(exc).__name__}: {exc})")
        return None
    if not data or len(data) % 8:
        _REASON.append(f"libseccomp exported {len(data)} bytes, not a BPF program")
        return None
    return data


class _Fd:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def filter_fd() -> int:
    """A fresh memfd holding the filter at offset 0 (bwrap reads it to the end); the caller closes it."""
    data = filter_bpf()
    if data is None:
        raise RuntimeError(unavailable_reason() or "no seccomp filter")
    fd = os.memfd_create("resrl-seccomp", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


__all__ = ["DENIED", "CLONE_NS_FLAGS", "filter_bpf", "filter_fd", "unavailable_reason"]
