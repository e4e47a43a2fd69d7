"""Sensitive value reveals: an operator's explicit look at one value, recorded.

The console shows sensitive values redacted. Revealing one is a write: it records who
revealed which value of which span and when (``agent_spans/record_reveal``), and only then
does the console read the span with its values. ``agent_spans/reveals`` lists those records.
"""

from __future__ import annotations

from typing import Any

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.envelopes import details_envelope
from governance_core.fields import Fields
from governance_core.models.agents import AgentSpan
from governance_core.models.description import sensitive_fields
from governance_core.operations.agent_spans import load_span
from governance_core.operations.common import list_response
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.rules.sensitive import MARKER_KEY

__all__ = ["marker_at"]

POINTER_MAX = 1000


def marker_at(record: Record, pointer: str) -> bool:
    """Whether ``pointer`` (``/payload/...`` or ``/result_payload/...``) names a marker."""
    if not pointer.startswith("/"):
        return False
    node: Any = record
    for raw in pointer[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif (isinstance(node, list) and part.isascii() and part.isdigit()
              and int(part) < len(node)):
            node = node[int(part)]
        else:
            return False
    return isinstance(node, dict) and MARKER_KEY in node


def _reveal_details(record: Record) -> dict[str, Any]:
    return {
        "id": record["id"],
        "account_id": record["account_id"],
        "agent_span_id": record["owner_id"],
        "pointer": record["pointer"],
        "token_id": record.get("token_id"),
        "admin_user_id": record.get("admin_user_id"),
        "inserted_at": record["inserted_at"],
        "type": "sensitive_reveal",
    }


@operation("agent_spans/record_reveal", write=True)
def record_reveal(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Record that the caller reveals the sensitive value at ``pointer`` of a span.

    ``pointer`` is a JSON Pointer into the span starting at ``/payload`` or
    ``/result_payload`` and must name a sensitive marker of a sensitive-encoded span.
    """
    record = load_span(ctx, fields.raw("agent_span_id"))
    pointer = fields.str("pointer", required=True, max_length=POINTER_MAX)
    if pointer is not None and (
        not record.get("sensitive_encoding")
        or pointer.partition("/")[2].split("/")[0] not in sensitive_fields(AgentSpan)
        or not marker_at(record, pointer)
    ):
        fields.errors.invalid("pointer", "pointer must name a sensitive value of the span")
    fields.done()
    assert ctx.principal is not None and pointer is not None
    reveal = {
        "id": ctx.new_id(),
        "account_id": ctx.account_id,
        "owner_id": record["id"],
        "pointer": pointer,
        "token_id": ctx.principal.token_id,
        "admin_user_id": ctx.principal.admin_user_id,
        "inserted_at": format_timestamp(ctx.now),
    }
    ctx.tables.sensitive_reveals.put(reveal)
    return details_envelope(_reveal_details(reveal))


@operation("agent_spans/reveals", write=False)
def list_reveals(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List the recorded reveals of one span's sensitive values (``agent_span_id``)."""
    record = load_span(ctx, fields.raw("agent_span_id"))
    return list_response(
        ctx, fields, ctx.tables.sensitive_reveals, sortable=("id", "inserted_at"),
        summarize=_reveal_details,
        filters=[Filter("owner_id", "eq", record["id"])],
    )
