"""Which of the project's modules one ``POST /api/v1/agent_spans`` passes through, in order.

The request runs through the WSGI app in process, on a SQLite file, after a few warm-up
creates (so nothing is imported or compiled on the way). Every call of a function of
``governance_core`` or ``governance_http`` is noted: the script prints how many project
modules the create enters, how many calls it makes, how many times a call moves from one
module to another, and how often the path turns back into a layer it had left (a handler
that calls the domain and comes back to the handler is two turns). ``--trace`` prints the
modules in the order they are first entered.

    python scripts/span_create_path.py [--trace]
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from governance_core.service import Governance
from governance_http.app import create_app

PACKAGES = ("governance_core", "governance_http")
SCHEMA = {"span_type_schemas": [{"name": "llm", "params_schema": {"type": "object"}}]}


def _layer(module: str) -> str:
    """The layer a module belongs to: its package and first sub-package."""
    return ".".join(module.split(".")[:2])


def _environ(token: str, body: dict[str, Any]) -> dict[str, Any]:
    data = json.dumps(body).encode()
    return {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/api/v1/agent_spans", "QUERY_STRING": "",
        "SERVER_NAME": "localhost", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(data),
        "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": True,
        "wsgi.run_once": False, "REMOTE_ADDR": "127.0.0.1",
        "HTTP_AUTHORIZATION": f"Bearer {token}", "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(data)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Trace one span create and print what it passed through."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="store_true", help="print the modules in order")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        gov = Governance.open(Path(tmp) / "path.db")
        try:
            token = gov.bootstrap().token
            session = gov.session(token)
            agent = session.details("agents/create", {"name": "traced"})
            run = session.details("agent_instances/register", {
                "agent_id": agent["id"], "agent_version": {"external_identifier": "1"},
                "agent_schema_version": {"external_identifier": "s", **SCHEMA},
            })
            app = create_app(gov)

            def create(number: int) -> None:
                body = {"agent_instance_id": run["id"], "schema_name": "llm",
                        "status": "complete", "payload": {"prompt": f"hello {number}"}}
                status: list[str] = []
                b"".join(app(_environ(token, body), lambda s, h, e=None: status.append(s)))
                assert status[0].startswith("200"), status

            for number in range(5):
                create(number)
            calls: list[str] = []

            def note(frame: FrameType, event: str, arg: object) -> None:
                if event == "call":
                    module = frame.f_globals.get("__name__", "")
                    if module.startswith(PACKAGES):
                        calls.append(module)

            sys.setprofile(note)
            try:
                create(5)
            finally:
                sys.setprofile(None)
        finally:
            gov.close()
    modules = list(dict.fromkeys(calls))
    switches = sum(1 for before, after in itertools.pairwise(calls) if before != after)
    layers = [layer for index, layer in enumerate(map(_layer, calls))
              if index == 0 or layer != _layer(calls[index - 1])]
    turns = sum(1 for index, layer in enumerate(layers) if layer in layers[:index])
    print(f"one POST /api/v1/agent_spans on SQLite: {len(modules)} project modules,"
          f" {len(calls)} calls, {switches} module switches, {turns} turns back into a layer")
    if args.trace:
        for module in modules:
            print(f"  {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
