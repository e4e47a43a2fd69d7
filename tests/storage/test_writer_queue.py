"""A SQLite file's writers queue on a lock file instead of polling ``BEGIN IMMEDIATE``."""

from __future__ import annotations

import errno
import fcntl
import multiprocessing
import os
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from governance_core.errors import TemporarilyUnavailable
from governance_core.storage import SQLiteStore
from governance_core.storage import sqlite as adapter
from governance_core.storage._writer_queue import LOCK_SUFFIX, WriterQueue

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the queue needs flock")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "governance.db"


@pytest.fixture
def busy_errors(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every busy answer SQLite gives this process's stores from now on."""
    seen: list[object] = []
    is_busy = adapter._is_busy

    def counting(error: object) -> bool:
        busy = is_busy(error)  # type: ignore[arg-type]
        if busy:
            seen.append(error)
        return busy

    monkeypatch.setattr(adapter, "_is_busy", counting)
    return seen


@contextmanager
def _held_by_another_store(path: Path) -> Iterator[threading.Event]:
    """Hold another store's transaction in a thread until the event yielded is set."""
    held, let_go = threading.Event(), threading.Event()
    other = SQLiteStore(path)

    def hold() -> None:
        with other.transaction():
            other.put("teams", {"id": "first"})
            held.set()
            let_go.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    try:
        yield let_go
    finally:
        let_go.set()
        thread.join()
        other.close()


def test_a_writer_waits_in_the_queue_not_by_trying_again(
    path: Path, busy_errors: list[object]
) -> None:
    store = SQLiteStore(path)
    with _held_by_another_store(path) as let_go:
        threading.Timer(0.1, let_go.set).start()
        with store.transaction():
            store.put("teams", {"id": "second"})
    # It began once the other writer had committed, and never met a busy database.
    assert busy_errors == []
    assert [r["id"] for r in store.query("teams")] == ["first", "second"]
    store.close()


def test_a_writer_that_gave_up_leaves_the_queue_open(path: Path) -> None:
    store = SQLiteStore(path, busy_timeout_ms=50)
    with (
        _held_by_another_store(path),
        pytest.raises(TemporarilyUnavailable),
        store.transaction(),
    ):
        store.put("teams", {"id": "lost"})
    # The queue's thread takes the lock for the writer that gave up, and lets it go at once.
    third = SQLiteStore(path, busy_timeout_ms=2000)
    for number in range(2):
        with third.transaction():
            third.put("teams", {"id": f"third-{number}"})
    store.busy_timeout_ms = 2000
    with store.transaction():
        store.put("teams", {"id": "after"})
    assert [r["id"] for r in store.query("teams")] == ["after", "first", "third-0", "third-1"]
    third.close()
    store.close()


def _try_to_write(queue: WriterQueue, go: Connection, answer: Connection) -> None:
    go.recv()
    answer.send(queue.acquire(0.2))


def test_a_forked_process_queues_behind_its_parent(path: Path) -> None:
    store = SQLiteStore(path)
    with store.transaction():
        store.put("teams", {"id": "opens-the-lock-file"})
    context = multiprocessing.get_context("fork")
    go_receiver, go_sender = context.Pipe(duplex=False)
    receiver, sender = context.Pipe(duplex=False)
    # The child inherits the open lock file, and with it whatever lock its parent holds.
    child = context.Process(target=_try_to_write, args=(store._writer, go_receiver, sender))
    child.start()
    with store.transaction():
        go_sender.send("go")
        assert receiver.poll(10)
        assert receiver.recv() is False
    child.join()
    store.close()


def _holds_open(fd: int, inode: int, answer: Connection) -> None:
    try:
        answer.send(os.fstat(fd).st_ino == inode)
    except OSError:
        answer.send(False)


def test_a_forked_child_closes_its_parents_lock_file(path: Path) -> None:
    # Kept open, it would keep the parent's lock held after the parent died.
    store = SQLiteStore(path)
    with store.transaction():
        store.put("teams", {"id": "opens-the-lock-file"})
    fd = store._writer._file._fd  # type: ignore[union-attr]
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_holds_open, args=(fd, os.fstat(fd).st_ino, sender))
    child.start()
    assert receiver.poll(10)
    assert receiver.recv() is False
    child.join()
    store.close()


def test_the_lock_file_has_the_databases_permissions(path: Path) -> None:
    SQLiteStore(path).close()
    os.chmod(path, 0o600)
    lock = Path(str(path) + LOCK_SUFFIX)
    lock.unlink(missing_ok=True)
    store = SQLiteStore(path)
    with store.transaction():
        store.put("teams", {"id": "t1"})
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    store.close()


def test_without_a_lock_file_writers_still_take_turns(path: Path, tmp_path: Path) -> None:
    queue = WriterQueue(str(tmp_path / "missing-folder" / "governance.db"))
    assert queue.acquire(1)
    assert not queue.acquire(0.05)
    queue.release()
    assert queue.acquire(1)
    queue.release()
    queue.close()


def _flock_failing_when(monkeypatch: pytest.MonkeyPatch, waiting: bool) -> None:
    """Make ``flock`` answer ENOLCK, as some network file systems do, when asked to lock.

    ``waiting``: only a lock that waits fails (the queue's thread's), else only one that
    does not (a writer's first try).
    """
    real = fcntl.flock

    def flock(fd: int, operation: int) -> None:
        locks = bool(operation & fcntl.LOCK_EX)
        waits = not operation & fcntl.LOCK_NB
        if locks and waits == waiting:
            raise OSError(errno.ENOLCK, "No locks available")
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)


@pytest.mark.parametrize("waiting", [False, True], ids=["first-try", "waiting"])
def test_where_flock_fails_writers_still_write(
    path: Path, monkeypatch: pytest.MonkeyPatch, waiting: bool
) -> None:
    store = SQLiteStore(path)
    with store.transaction():
        store.put("teams", {"id": "opens-the-lock-file"})
    with _held_by_another_store(path) as let_go:
        _flock_failing_when(monkeypatch, waiting)
        threading.Timer(0.1, let_go.set).start()
        # The queue given up, the other writer is waited for through SQLite's busy answers.
        with store.transaction():
            store.put("teams", {"id": "second"})
    with store.transaction():
        store.put("teams", {"id": "third"})
    assert store.count("teams") == 4
    store.close()


def _hold_until_killed(path: str, held: Connection) -> None:
    store = SQLiteStore(path)
    with store.transaction():
        store.put("teams", {"id": "never-committed"})
        held.send("held")
        threading.Event().wait()


def test_a_writer_killed_in_its_transaction_lets_the_next_one_in(path: Path) -> None:
    store = SQLiteStore(path, busy_timeout_ms=20_000)
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    holder = context.Process(target=_hold_until_killed, args=(str(path), sender))
    holder.start()
    assert receiver.poll(30) and receiver.recv() == "held"
    assert holder.pid is not None
    threading.Timer(0.2, os.kill, args=(holder.pid, signal.SIGKILL)).start()
    # Waiting in the queue when the holder dies: the kernel lets its lock go with it.
    with store.transaction():
        store.put("teams", {"id": "after"})
    holder.join()
    assert [r["id"] for r in store.query("teams")] == ["after"]
    store.close()
