#!/usr/bin/env python3
"""Run the README's first command as a new user would, and check that the server it starts answers.

The command is read from README.md (the first ``sh`` block after the "## Two commands"
heading), never copied here, and run with ``sh -c`` in a fresh ``git clone`` of the repository
in a temporary directory, where it makes its own virtual environment and installs into it.
Once ``http://127.0.0.1:8000/api/v1/ping`` and the console at ``/`` answer, and the first start
printed its token, both must still answer five seconds later. The server's process group is
then stopped. Any failure exits with status 1 and a message naming the step, with the end of
the command's output.

Usage: ``python3 .ci/smoke_first_command.py [--repo PATH] [--timeout SECONDS]``; ``--repo`` is
the repository to clone (default: this one).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Two commands"
# The address the README tells people to open.
HOST, PORT = "127.0.0.1", 8000
BASE = f"http://{HOST}:{PORT}"
STILL_UP_AFTER = 5.0
TOKEN_LINE = re.compile(r"^token \(shown once, keep it\):\s+pf_\S+$", re.M)


class SmokeFailure(Exception):
    """A step of the smoke test failed; the message says which and why."""


def first_command(readme: str) -> str:
    """The first ``sh`` block after the "## Two commands" heading, as written."""
    heading = re.search(rf"^{re.escape(HEADING)}[ \t]*$", readme, re.M)
    if heading is None:
        raise SmokeFailure(f"README.md has no {HEADING!r} heading")
    block = re.compile(r"^```sh\n(.*?)^```", re.S | re.M).search(readme, heading.end())
    if block is None or not block.group(1).strip():
        raise SmokeFailure(f"README.md has no ```sh block after {HEADING!r}")
    return block.group(1).strip()


def check_port_free() -> None:
    """Fail when anything listens on the README's port: the server could not start there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, PORT))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise SmokeFailure(
                    f"port {PORT} on {HOST} is in use; the README's first command serves there: "
                    "stop what listens on it and run again"
                ) from error
            raise


def clean_environment() -> dict[str, str]:
    """The environment to run the command in: no virtual environment, no project settings."""
    unset = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"}
    environment = {
        name: value for name, value in os.environ.items()
        if not name.startswith("GOVERNANCE_") and name not in unset
    }
    active = os.environ.get("VIRTUAL_ENV")
    if active:
        inside = str(Path(active) / "bin")
        environment["PATH"] = os.pathsep.join(
            entry for entry in environment.get("PATH", "").split(os.pathsep) if entry != inside
        )
    return environment


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def answer(path: str) -> tuple[int, str, str]:
    """Status, ``Location`` header and body of ``GET path``, redirects not followed."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(f"{BASE}{path}", timeout=5) as response:
            return response.status, response.headers.get("Location", ""), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location", ""), error.read().decode()


def problems() -> list[str]:
    """What is wrong with the answers at ``/api/v1/ping`` and ``/``; empty when both are right."""
    found = []
    try:
        status, _, body = answer("/api/v1/ping")
        if status != 200 or json.loads(body) != {"status": "success"}:
            found.append(f"GET /api/v1/ping answered {status}: {body[:200]}")
    except (OSError, ValueError) as error:
        found.append(f"GET /api/v1/ping failed: {error}")
    try:
        status, location, body = answer("/")
        if status == 303 and location.startswith("/sign-in"):
            status, _, body = answer(location)
            if status != 200:
                found.append(f"GET {location} (where / sent) answered {status}")
        elif status != 200:
            found.append(f"GET / answered {status}: {body[:200]}")
    except OSError as error:
        found.append(f"GET / failed: {error}")
    return found


def tail(log: Path, lines: int = 40) -> str:
    """The last lines of the command's output."""
    text = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(text[-lines:])


def listening() -> bool:
    """Whether anything accepts connections on the README's port."""
    try:
        with socket.create_connection((HOST, PORT), timeout=1):
            return True
    except OSError:
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the command's whole process group (the shell, pip or the server and its workers).

    The server gets ``SIGTERM`` and up to 15 s to let the port go; whatever of the group is
    left then is killed, so that the port is free for what runs next.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (process.poll() is None or listening()):
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def smoke(repo: Path, timeout: float, workdir: Path) -> float:
    """Run the check in ``workdir``; return the seconds until the server answered."""
    command = first_command((ROOT / "README.md").read_text())
    print(f"smoke: the README's first command: {command}", flush=True)
    check_port_free()
    clone = workdir / "checkout"
    cloned = subprocess.run(["git", "clone", "--quiet", str(repo), str(clone)],
                            capture_output=True, text=True, check=False)
    if cloned.returncode != 0:
        raise SmokeFailure(f"git clone {repo} failed: {cloned.stderr.strip()}")
    log = workdir / "output.log"
    started = time.monotonic()
    with log.open("wb") as output:
        process = subprocess.Popen(
            ["sh", "-c", command], cwd=clone, env=clean_environment(), stdin=subprocess.DEVNULL,
            stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        found = ["not started"]
        while found:
            if process.poll() is not None:
                raise SmokeFailure(
                    f"the command exited with status {process.returncode} before "
                    f"{BASE}/api/v1/ping and / answered; its output ends:\n{tail(log)}")
            if time.monotonic() - started > timeout:
                raise SmokeFailure(
                    f"after {timeout:.0f} s (install included) the server does not answer: "
                    f"{'; '.join(found)}; the output ends:\n{tail(log)}")
            time.sleep(1)
            found = problems()
        ready = time.monotonic() - started
        print(f"smoke: ping and the console answered {ready:.1f} s after the command started",
              flush=True)
        if not TOKEN_LINE.search(log.read_text(errors="replace")):
            raise SmokeFailure(f"the first start printed no token; its output ends:\n{tail(log)}")
        time.sleep(STILL_UP_AFTER)
        if process.poll() is not None:
            raise SmokeFailure(
                f"the server exited (status {process.returncode}) within {STILL_UP_AFTER:.0f} s "
                f"of answering; its output ends:\n{tail(log)}")
        later = problems()
        if later:
            raise SmokeFailure(
                f"{STILL_UP_AFTER:.0f} s after answering: {'; '.join(later)}; the output ends:\n"
                f"{tail(log)}")
        print(f"smoke: still answering {STILL_UP_AFTER:.0f} s later", flush=True)
        return ready
    finally:
        stop(process)


def main() -> int:
    """Run the smoke test; exit status 1 with the reason when it fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="the repository to clone")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds the command may take to answer, install included")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="governance-smoke-"))
    try:
        smoke(args.repo.resolve(), args.timeout, workdir)
    except SmokeFailure as failure:
        print(f"smoke: FAILED: the README's first command: {failure}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("smoke: passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
