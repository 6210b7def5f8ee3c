"""Small filesystems for a broker's log directories, and the two disk faults on them (root only).

* :class:`Tmpfs`: a tmpfs of a given size mounted on a directory (``mount(2)`` through libc).
* :class:`LoopExt4`: an ext4 filesystem in an image file on a loop device, mounted with
  ``errors=remount-ro`` on a directory.

``fill()`` writes a filler file until the filesystem has no byte left (``disk-full``: every write
then fails with ENOSPC); ``free()`` deletes it.  ``fail_writes()`` (``disk-error``, ext4 only) makes
the kernel take the filesystem read-only as it does on a real I/O error (ext4's ``trigger_fs_error``
with ``errors=remount-ro``): every write, to files already open too, fails with EROFS.  A plain
``mount -o remount,ro`` cannot do that: the kernel refuses it (EBUSY) while a broker holds a segment
open for writing, and a read-only bind mount leaves those descriptors writable.  ``repair()`` (the
broker stopped) unmounts, checks and mounts it again.  ``unmount()`` is safe to call twice and on
failure paths: every mount a run makes is undone.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import subprocess
from pathlib import Path

FILLER = ".kafkasim-disk-full"
MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class DiskError(RuntimeError):
    pass


def can_mount() -> str | None:
    """None when this process may mount filesystems, else why not."""
    if os.geteuid() != 0:
        return "disk faults mount a filesystem per log directory: run as root"
    return None


def _mount(source: str, target: Path, fstype: str, options: str) -> None:
    if _libc.mount(source.encode(), str(target).encode(), fstype.encode(), 0, options.encode()) != 0:
        e = ctypes.get_errno()
        raise DiskError(f"mount -t {fstype} -o {options} {source} {target}: {os.strerror(e)}")


def _umount(target: Path) -> None:
    if _libc.umount2(str(target).encode(), 0) != 0:
        e = ctypes.get_errno()
        if e == errno.EINVAL:   # not mounted (any more)
            return
        if e == errno.EBUSY and _libc.umount2(str(target).encode(), MNT_DETACH) == 0:
            return   # a process still holds a file there: detached now, freed when it lets go
        raise DiskError(f"umount {target}: {os.strerror(e)}")


def is_mounted(target: Path) -> bool:
    t = os.path.realpath(target)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == t for line in f)


def fill(target: Path) -> int:
    """Take every free byte of the filesystem at ``target`` with a filler file; returns its size."""
    path = Path(target) / FILLER
    with open(path, "ab", buffering=0) as f:
        st = os.statvfs(target)
        room = st.f_bavail * st.f_frsize
        if room > 0:
            try:
                os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, room)
            except OSError:
                pass
        size = 1 << 16
        while size:   # what fallocate could not take (metadata, rounding): write until the device says no
            try:
                f.write(b"\0" * size)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                size //= 16
    return os.path.getsize(path)


def free(target: Path) -> bool:
    """Delete the filler file (True when there was one)."""
    try:
        (Path(target) / FILLER).unlink()
        return True
    except FileNotFoundError:
        return False


class Tmpfs:
    kind = "tmpfs"

    def __init__(self, target: Path, size_bytes: int) -> None:
        self.target = Path(target)
        self.size_bytes = size_bytes
        self.mounted = False

    def mount(self) -> "Tmpfs":
        self.target.mkdir(parents=True, exist_ok=True)
        _mount("tmpfs", self.target, "tmpfs", f"size={self.size_bytes},mode=0755")
        self.mounted = True
        return self

    def fail_writes(self) -> None:
        raise DiskError("a tmpfs cannot fail its writes while files are open for writing: use ext4 (disk-error)")

    def repair(self) -> None:
        free(self.target)

    def unmount(self) -> None:
        if self.mounted:
            _umount(self.target)
            self.mounted = False


class LoopExt4:
    kind = "ext4"

    def __init__(self, target: Path, image: Path, size_bytes: int) -> None:
        self.target = Path(target)
        self.image = Path(image)
        self.size_bytes = size_bytes
        self.device: str | None = None
        self.mounted = False

    def mount(self) -> "LoopExt4":
        self.target.mkdir(parents=True, exist_ok=True)
        self.image.parent.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.size_bytes)
        _run(["mkfs.ext4", "-q", "-F", "-m", "0", str(self.image)])
        self.device = _run(["losetup", "-f", "--show", str(self.image)]).strip()
        self._mount()
        return self

    def _mount(self) -> None:
        assert self.device is not None
        _mount(self.device, self.target, "ext4", "errors=remount-ro")
        self.mounted = True

    def fail_writes(self) -> None:
        """The kernel's own response to an I/O error (``errors=remount-ro``): read-only at once, open files too."""
        assert self.device is not None
        Path(f"/sys/fs/ext4/{os.path.basename(self.device)}/trigger_fs_error").write_text("kafkasim disk-error\n")

    def repair(self) -> None:
        """With nothing open on it (the broker stopped): unmount, e2fsck, mount read-write again."""
        free(self.target)   # a read-only filesystem keeps its filler: removed after the remount below
        if self.mounted:
            _umount(self.target)
            self.mounted = False
        assert self.device is not None
        subprocess.run(["e2fsck", "-fy", self.device], capture_output=True)   # exit 1: errors corrected
        self._mount()
        free(self.target)

    def unmount(self) -> None:
        if self.mounted:
            _umount(self.target)
            self.mounted = False
        if self.device is not None:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
            self.device = None
        self.image.unlink(missing_ok=True)


def _run(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise DiskError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")
    return r.stdout


class RunDisks:
    """A chaos run's filesystems: one per log directory of every broker, mounted before the brokers start
    (tmpfs, or ext4 on a loop device when the run may fail writes), all unmounted at its end."""

    def __init__(self, dirs: dict[int, list[Path]], size_bytes: int, fail_writes: bool, images: Path) -> None:
        self.by_broker: dict[int, list[Tmpfs | LoopExt4]] = {}
        self._plan = (dirs, size_bytes, fail_writes, images)

    def mount(self) -> "RunDisks":
        why = can_mount()
        if why is not None:
            raise DiskError(why)
        dirs, size, ext4, images = self._plan
        try:
            for b, paths in sorted(dirs.items()):
                for i, d in enumerate(paths):
                    fs = LoopExt4(d, images / f"broker-{b}-{i}.img", size) if ext4 else Tmpfs(d, size)
                    self.by_broker.setdefault(b, []).append(fs)
                    fs.mount()
        except BaseException:
            self.unmount_all()
            raise
        return self

    def holding(self, broker: int, tp: tuple[str, int] | None) -> list["Tmpfs | LoopExt4"]:
        """The filesystem holding ``tp``'s log on ``broker`` (its ``<topic>-<p>`` folder), or, when ``tp`` is
        None or found in none, every one of the broker's."""
        mine = self.by_broker.get(broker, [])
        if tp is not None:
            found = [fs for fs in mine if (fs.target / f"{tp[0]}-{tp[1]}").is_dir()]
            if found:
                return found[:1]
        return list(mine)

    def unmount_all(self) -> list[str]:
        """Unmount everything (each attempted, whatever failed before); the errors, if any."""
        problems = []
        for fss in self.by_broker.values():
            for fs in fss:
                try:
                    fs.unmount()
                except Exception as e:   # noqa: BLE001 - go on with the others, report them all
                    problems.append(f"{fs.target}: {e}")
        return problems
