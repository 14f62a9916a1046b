"""Reading one snapshot file, refusing what is not one: a FIFO would block for ever,
``/dev/zero`` would fill memory, ``/proc`` and ``/sys`` files are the live kernel's."""

from __future__ import annotations

import os
import stat

# Larger than any file of a real dump (a 30,000-pod pods.json is ~200 MB), small enough
# that reading one cannot exhaust the machine.
MAX_FILE = 2 << 30
_KERNEL_DIRS = ("/proc/", "/sys/", "/dev/")


class NotAFile(OSError):
    """The path is not a regular file of a sane size; the message says what it is."""


def read_file(path: str, limit: int = MAX_FILE) -> bytes:
    """The file's bytes. Raises ``NotAFile`` for special files, ``/proc``, ``/sys`` and
    ``/dev`` paths and files over ``limit`` bytes; ``OSError`` when it cannot be read."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotAFile(f"not a regular file ({_what(st.st_mode)})")
    kernel = kernel_path(path)
    if kernel:
        raise NotAFile(kernel)
    if st.st_size > limit:
        raise NotAFile(f"larger than {limit >> 20} MB ({st.st_size >> 20} MB)")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            # As large as stat says: asking for `limit` bytes would allocate them first.
            data = fh.read(st.st_size + 1)
            if len(data) > st.st_size:  # it has grown since stat
                data += fh.read(limit + 1 - len(data))
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise NotAFile(f"larger than {limit >> 20} MB")
    return data


def kernel_path(path: str) -> str | None:
    """Why ``path`` is refused when it lies in ``/proc``, ``/sys`` or ``/dev``."""
    real = os.path.realpath(path)
    if (real + "/").startswith(_KERNEL_DIRS) and not real.startswith("/dev/shm/"):
        return f"a file of /{real.split('/')[1]} (the running system), not a snapshot"
    return None


def _what(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a special file"
