"""The queue a SQLite file's writers wait in: this process's threads, and other processes.

SQLite lets one connection write at a time and answers ``SQLITE_BUSY`` to the others, which
must try again later. A writer that tries again after a pause mostly loses to the writer that
has just committed, since that one asks again at once: with two server processes on one file,
one process wrote while the other slept, and the server used one core of two. Here a file's
writers queue on an exclusive ``flock`` of a lock file beside it (``<file>-lock``), so the
kernel wakes a waiting process as soon as the holder lets go, and the processes take turns, each
reading and answering its next request while the other writes.

``flock`` cannot time out, so a daemon thread of each process waits on it for the process's
writer, who gives up after its timeout; the thread then lets the lock go as soon as it gets it.
Where ``fcntl`` is missing (Windows), the lock file cannot be opened or ``flock`` fails (some
network file systems), only this process's threads queue, and other processes are waited for
by trying ``BEGIN IMMEDIATE`` again.
"""

from __future__ import annotations

import os
import stat
import threading
import time
import weakref

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_SUFFIX", "WriterQueue"]

LOCK_SUFFIX = "-lock"
"""What a database file's name is followed by in the name of its writers' lock file."""


class WriterQueue:
    """One writer at a time for the database file at ``path``, across threads and processes.

    :meth:`acquire` waits at most ``timeout_s`` and tells whether the caller is the writer;
    :meth:`release` lets the next one in. A process forked from the one that opened the queue
    closes the inherited lock file at once and opens its own on its first write.
    """

    def __init__(self, path: str) -> None:
        self._database_path = path
        self._threads = threading.Lock()
        self._file: _FileLock | None = None
        self._file_pid: int | None = None  # the process that opened (or failed to open) _file

    def acquire(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` seconds to be the file's writer; whether it was granted."""
        deadline = time.monotonic() + timeout_s
        if not self._threads.acquire(timeout=timeout_s):
            return False
        try:
            file = self._file_lock()
            if file is None or file.acquire(deadline - time.monotonic()):
                return True
        except BaseException:
            self._threads.release()
            raise
        self._threads.release()
        return False

    def release(self) -> None:
        """Let the next writer in (the caller is the writer)."""
        try:
            if self._file is not None and self._file_pid == os.getpid():
                self._file.release()
        finally:
            self._threads.release()

    def close(self) -> None:
        """Close the lock file (a wait still under way ends on its own)."""
        if self._file is not None and self._file_pid == os.getpid():
            self._file.close()
        self._file = None
        self._file_pid = None

    def _file_lock(self) -> _FileLock | None:
        if fcntl is None:
            return None
        if self._file_pid != os.getpid():
            # A forked child shares its parent's open lock file, and with it the parent's lock.
            self._file_pid = os.getpid()
            self._file = _FileLock.open(self._database_path)
        return self._file


class _FileLock:
    """An exclusive ``flock`` of one open file, waited for by a daemon thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._fd_open = True
        _OPEN.add(self)
        self._state = threading.Condition()
        self._asked = False  # the thread is to take the lock, or is taking it
        self._waiting = False  # a writer waits for what the thread takes
        self._handed = False  # the thread took it for the waiting writer
        self._closed = False
        self._broken = False  # flock failed (some network file systems): writers poll instead
        self._thread: threading.Thread | None = None

    @classmethod
    def open(cls, database_path: str) -> _FileLock | None:
        """The database's lock file, made with its permissions; None if it can't be opened."""
        try:
            mode = stat.S_IMODE(os.stat(database_path).st_mode)
        except OSError:
            mode = 0o644
        try:
            fd = os.open(database_path + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
        except OSError:
            return None
        return cls(fd)

    def acquire(self, timeout_s: float) -> bool:
        # Only a writer sets _asked, and one writer of this process at a time gets here: read
        # without the condition, False means the thread is idle.
        if self._broken:
            return True
        if not self._asked:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
            except OSError:
                self._broken = True
                return True
        with self._state:
            # Unless the thread is still taking the lock for a writer who gave up: this writer
            # takes it over.
            if not self._asked:
                self._asked = True
                self._start_thread()
                self._state.notify_all()
            self._waiting = True
            handed = self._state.wait_for(lambda: self._handed, timeout=max(timeout_s, 0))
            self._waiting = False
            self._handed = False
            return handed

    def release(self) -> None:
        if not self._broken:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._state:
            self._closed = True
            self._state.notify_all()
            if not self._asked:
                self._close_fd()
            # Else the thread closes it once its flock returns: a number closed under a
            # waiting flock could be reused by another file before the thread lets it go.

    def forget_inherited(self) -> None:
        """In a forked child: close the parent's open file, so the parent's lock dies with it."""
        self._closed = True
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd_open:
            self._fd_open = False
            _OPEN.discard(self)
            os.close(self._fd)

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._take_when_asked, name="governance-sqlite-writer-queue", daemon=True
            )
            self._thread.start()

    def _take_when_asked(self) -> None:
        while True:
            with self._state:
                self._state.wait_for(lambda: self._asked or self._closed)
                if self._closed and not self._asked:
                    return
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except OSError:
                with self._state:
                    self._broken = True
                    self._asked = False
                    self._handed = self._waiting
                    self._state.notify_all()
                    if self._closed:
                        self._close_fd()
                return
            with self._state:
                self._asked = False
                if self._closed:
                    self._close_fd()
                    return
                if self._waiting:
                    self._handed = True
                    self._state.notify_all()
                else:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)


_OPEN: weakref.WeakSet[_FileLock] = weakref.WeakSet()


def _forget_inherited_locks() -> None:
    # A child that kept its parent's open lock file would keep the parent's lock held after the
    # parent died; the child's own writes open a lock file of their own.
    for lock in list(_OPEN):
        lock.forget_inherited()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_locks)
