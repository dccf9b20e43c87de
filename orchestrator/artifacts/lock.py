"""One writer per artifact: ``bench scenario resume`` holds an exclusive ``flock`` on the artifact folder.

The lock is taken on the folder's own descriptor (``fcntl.flock``), so there is no lock file to
write, to list or to go stale: the kernel releases it when the holder exits, however it ends
(SIGKILL included). A second resume of the same artifact is refused at once (exit 2).
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.errors import BadInput


@contextmanager
def artifact_lock(root: Path) -> Iterator[None]:
    """Hold the artifact's lock for the block; BadInput when another process holds it."""
    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"{root}: cannot open the artifact ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise BadInput(f"{root}: refused: another bench is resuming this artifact (it holds the artifact's lock); "
                               "wait for it to finish") from None
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF):
                raise
            # a file system without flock (some network mounts): no lock to take, none to refuse
        yield
    finally:
        os.close(fd)  # releases the lock
