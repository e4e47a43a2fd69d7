"""Ids a caller supplies on create (decisions 2).

Reading and claiming are two steps so that a malformed id is reported with the request's other
field errors (422), and a taken one only once the request is otherwise valid (409). Whether an
id is taken, and by what kind of resource, is one read of the store's ``ids`` table (see
:data:`governance_core.storage.schema.IDS`), whatever the number of resource tables.
"""

from __future__ import annotations

from governance_core.context import Context
from governance_core.errors import Conflict, FieldErrors, InvalidValue, UnexpectedRefType
from governance_core.fields import Fields
from governance_core.ids import extract_partition
from governance_core.repository import Record

__all__ = ["claim_id", "id_holder", "read_supplied_id", "resolve_reference"]


def read_supplied_id(ctx: Context, fields: Fields, name: str = "id") -> str | None:
    """Read the id the caller asked for, or None (then one is generated).

    A malformed id, or one outside the caller's account partition (every id of an account
    shares its partition), is ``invalid_value`` on ``name``.
    """
    requested = fields.id(name)
    if requested is None:
        return None
    assert ctx.principal is not None
    if extract_partition(requested) != ctx.principal.partition:
        fields.errors.invalid(name, f"{name} must be an id of this account's partition")
        return None
    return requested


def id_holder(ctx: Context, record_id: str) -> Record | None:
    """What holds ``record_id``: ``{"id", "kind", "account_id"}``, or None when no resource does.

    Any account's resource counts: ids are unique across accounts.
    """
    return ctx.tables.ids.get(record_id)


def claim_id(ctx: Context, requested: str | None) -> str:
    """Return ``requested`` when no record holds it (else ``conflict``), or a new id."""
    if requested is None:
        return ctx.new_id()
    if id_holder(ctx, requested) is not None:
        raise Conflict(f"the id {requested} is already in use")
    return requested


def resolve_reference(
    ctx: Context, errors: FieldErrors, name: str, kind: str, value: str | None
) -> Record | None:
    """The caller's ``kind`` record the member ``name`` refers to, or an error on that member.

    A missing id is ``invalid_value``; an id of another kind of resource in the caller's
    account is ``unexpected_ref_type`` (looked up, in the store's ``ids``, only on this error
    path). None when ``value`` is None (a member not sent, or already reported).
    """
    if value is None:
        return None
    record = ctx.tables.of_kind(kind).get(value)
    if record is not None and record.get("account_id") == ctx.account_id:
        return record
    holder = id_holder(ctx, value)
    if holder is not None and holder["kind"] != kind and holder["account_id"] == ctx.account_id:
        errors.add(name, UnexpectedRefType(f"{name} must refer to a {kind}"))
        return None
    errors.add(name, InvalidValue(f"{name} does not name an existing {kind}"))
    return None
