"""A whole run as JSON Lines: ``GET /api/v1/agent_instance/{agent_instance_id}/export.jsonl``.

The answer (``application/x-ndjson``) is the run's details on the first line, then one span a
line in start order (``started_at``, then ``id``); every line is one resource with its
``type``. It is written page by page of the core's ``agent_instances/export``, each page
read when the previous one has been written, so the app holds one page of spans at a time
(``page_size``, default and most 1000). The query is that operation's (``redacted``,
``page_size``, ``cursor`` to start after a span).

Behind ``governance serve`` the ASGI front (:mod:`governance_http.gateway`) collects a WSGI
answer whole before it sends it, so the server holds one export's body at a time per request
(about 850 bytes a span: some 1.7 MB for 2,000 spans, 85 MB for 100,000) while the core still
reads and converts one page at a time; a WSGI server that streams sends each page as it is
read.

The first page is read before the answer starts, so a bad token, an unknown run or a bad
member answers the usual JSON error. A failure on a later page ends the body early: a
client that needs every span compares the span lines with the run's ``span_counts``, or
reads the pages of ``GET .../export`` instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import falcon

from governance_core import jsontext
from governance_core.context import Principal
from governance_core.service import Governance
from governance_http.auth import bearer_token
from governance_http.params import parse_query
from governance_http.resources.operations import header_key
from governance_http.routes import RUN_EXPORT

__all__ = ["JSON_LINES", "RunLinesResource", "run_lines"]

JSON_LINES: Final = "application/x-ndjson"
"""The media type of the answer: one JSON value a line."""

_KEY = "idempotency_key"


def _chunk(values: list[dict[str, Any]]) -> bytes:
    # JSON text never holds a raw line break (one in a string is written \n), so each value
    # is exactly one line.
    return "".join(jsontext.dumps(value) + "\n" for value in values).encode()


def run_lines(
    governance: Governance,
    principal: Principal,
    members: dict[str, Any],
    first: dict[str, Any],
) -> Iterator[bytes]:
    """Yield the JSON Lines of a run, a page a chunk, from its ``first`` export page on.

    ``members`` are the export's members; each later page is read with the previous page's
    ``next_cursor``, only once the previous chunk has been taken.
    """
    page = first
    yield _chunk([page["details"], *page["spans"]])
    while page["next_cursor"] is not None:
        page = governance.call(
            RUN_EXPORT, {**members, "cursor": page["next_cursor"]}, principal=principal
        )
        yield _chunk(page["spans"])


class RunLinesResource:
    """Serves a run with all its spans as JSON Lines (see the module)."""

    def __init__(self, governance: Governance) -> None:
        self._governance = governance

    def on_get(self, req: falcon.Request, resp: falcon.Response, agent_instance_id: str) -> None:
        """Read the first page (errors answer as JSON), then stream the rest."""
        principal = self._governance.authenticate(bearer_token(req))
        query = parse_query(req.query_string)
        # A repeated query key arrives as a list, which the core refuses by name.
        keys: list[Any] = [header_key(req), query.pop(_KEY, None)]
        members: dict[str, Any] = {**query, "agent_instance_id": agent_instance_id}
        first = self._governance.call(
            RUN_EXPORT, members, principal=principal, idempotency_keys=keys
        )
        resp.content_type = JSON_LINES
        resp.stream = run_lines(self._governance, principal, members, first)
