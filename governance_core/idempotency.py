"""Idempotency keys: a replayed write answers its stored response; a changed one is refused.

Scope is (account, operation, key). Only successes are stored, inside the same transaction as
the write, so a key is stored if and only if its write is. A secret a response shows once (a
new token) is not stored with it: its replay answers the form without the secret (decisions 4:
only hashes of secrets are stored).

A record keeps what a replay needs: the request's digest and the response, whole, so that a
replay answers the very body the first call did, whatever changed since (a span finished, its
run ended). The response is kept compactly: its JSON, deflated with a fixed dictionary of the
members responses share, in Base64 (:func:`pack_response`); a span create's response takes
about a third of its plain JSON. Records older than the window (:data:`KEEP_FOR`; decisions
5: at least 24 hours) are deleted by :func:`purge_expired_keys`, a bounded batch at a time.

The OTLP ingest, which never answers a stored response, keeps no record: each span it stores
holds its create's digest. Records of the digest alone, under a scope of the ingest's own
(no key sent to an operation reaches it), are what it kept before, read for the spans stored
then.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import rapidjson

from governance_core import jsontext
from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.credentials import ShownOnce, withhold_secrets
from governance_core.errors import FieldErrors, IdempotencyKeyAlreadyUsed
from governance_core.fields import flatten_params
from governance_core.repository import Filter, SortKey, Tables
from governance_core.storage.protocol import Store

__all__ = [
    "KEEP_FOR",
    "KEY_MAX",
    "KEY_MIN",
    "PURGE_BATCH",
    "IdempotentRequest",
    "fingerprint",
    "key_already_used",
    "pack_response",
    "purge_expired_keys",
    "read_ahead",
    "record_id",
    "resolve_key",
    "same_request",
    "unpack_response",
]

KEEP_FOR = timedelta(hours=24)
"""How long a key is kept at least (decisions 5): :func:`purge_expired_keys` keeps it this long."""
PURGE_BATCH = 500
"""How many records one transaction of :func:`purge_expired_keys` deletes at most."""

# The members and values responses share, most of all a span create's: deflate finds them
# here, so even their first occurrence in a response costs a few bits. Never change these
# bytes: records written with them are read with them. Another dictionary takes another
# member name (``z2``) beside this one.
_DICTIONARY_1 = (
    b'[{"status":"success","type":"agent_instance","details":{"agent_instance_id":null,"ag'
    b'ent_id":null,"agent_version_id":null,"agent_deployment_id":null,"environment_id":nul'
    b'l,"external_identifier":null,"status":"running","purpose":"activity","risk_level":nu'
    b'll,"total_cost":null,"last_activity_span_at":null,"control":{"action":"continue"}}},'
    b'{"otel.span":{"name":"","kind":"internal","trace_id":"","span_id":"","parent_span_id'
    b'":null,"scope":{"name":"","version":""},"agent":null},"otel.status":{"code":"unset",'
    b'"message":null},"gen_ai.operation.name":"chat","gen_ai.request.model":"","gen_ai.pro'
    b'vider.name":"","gen_ai.usage.input_tokens":0,"gen_ai.usage.output_tokens":0,"gen_ai.'
    b'input.messages":"","gen_ai.output.messages":"","gen_ai.tool.name":"","gen_ai.tool.ca'
    b'll.arguments":"","$sensitive":"string","labels":["opentelemetry"]},{"data_risk":{"ac'
    b'tion_profile":{"create_data":"unknown","read_data":"allowed","update_data":"unknown"'
    b',"destroy_data":"unknown","financial_transactions":"unknown","external_communication'
    b'":"unknown"},"params_data_categories":{"personal_identifiers":"unknown","contact_inf'
    b'ormation":"unknown","financial_information":"unknown","health_and_medical":"unknown"'
    b',"criminal_justice":"unknown","authentication_and_secrets":"unknown","organisational'
    b'_confidential":"unknown","minors_data":"unknown","location_and_tracking":"unknown","'
    b'behavioural_and_inferred":"unknown","gdpr_racial_or_ethnic_origin":"unknown","gdpr_p'
    b'olitical_opinions":"unknown","gdpr_religious_or_philosophical_beliefs":"unknown","gd'
    b'pr_trade_union_membership":"unknown","gdpr_genetic_data":"unknown","gdpr_biometric_f'
    b'or_identification":"unknown","gdpr_sex_life_or_sexual_orientation":"unknown","classi'
    b'fication":"unknown"},"result_data_categories":{}}},{"status":"success","details":{"i'
    b'd":"","account_id":"","agent_id":"","agent_instance_id":"","schema_name":"gen_ai:cha'
    b't","schema_title":"Chat completion","status":"complete","purpose":"activity","starte'
    b'd_at":"","inserted_at":"","updated_at":"","payload":{},"result_payload":{},"parent_s'
    b'pan_id":null,"finished_at":"","sensitive_encoding":false,"summary":"","size_bytes":0'
    b',"schema_known":true,"payload_validation":{"status":"valid","message":null},"result_'
    b'payload_validation":{"status":"valid","message":null},"data_risk":null,"type":"agent'
    b'_span"}}]'
)
_PACKED = "z1"

KEY_MIN, KEY_MAX = 8, 128
FIELD = "idempotency_key"
_VERSION = "2:"


class _Canonical(rapidjson.Encoder):
    """Sorted keys, so that the same members in any order are the same request."""

    def default(self, value: object) -> str:
        return str(value)


_CANONICAL = _Canonical(
    sort_keys=True, ensure_ascii=False, mapping_mode=rapidjson.MM_COERCE_KEYS_TO_STRINGS
)


def resolve_key(params: Mapping[str, Any] | None, extra: Iterable[str | None] = ()) -> str | None:
    """The request's key, from the body or ``details`` or the extra sources (header, query).

    Sources that disagree, or a key outside 8..128 characters, are ``validation_errors`` on
    ``idempotency_key``.
    """
    found: list[Any] = []
    params = params or {}
    details = params.get("details")
    inner: Mapping[str, Any] = (
        details if type(details) is dict or isinstance(details, Mapping) else {}
    )
    for source in (params, inner):
        if source.get(FIELD) is not None:
            found.append(source[FIELD])
    found.extend(value for value in extra if value is not None)
    if not found:
        return None
    errors = FieldErrors()
    if any(not isinstance(value, str) for value in found):
        errors.invalid(FIELD, "idempotency_key must be a string")
    elif len(set(found)) > 1:
        errors.invalid(FIELD, "the idempotency keys given in this request disagree")
    elif not KEY_MIN <= len(found[0]) <= KEY_MAX:
        errors.invalid(FIELD, f"idempotency_key must be {KEY_MIN} to {KEY_MAX} characters long")
    errors.raise_if_any()
    key: str = found[0]
    return key


def fingerprint(operation: str, params: Mapping[str, Any] | None) -> str:
    """A digest of what the request asks for, whatever envelope form it came in.

    Versioned (``2:`` and the digest): records stored before hold the digest of
    :func:`_legacy_fingerprint`, which a replay compares against instead.
    """
    asked = [operation, _asked(params)]
    try:
        text = _CANONICAL(asked)
    except ValueError:
        # A lone surrogate, which only the standard library writes (escaped).
        text = _standard_text(asked)
    assert text is not None
    return _VERSION + hashlib.sha256(text.encode()).hexdigest()


def _asked(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in flatten_params(params).items() if k != FIELD}


def _standard_text(asked: list[Any]) -> str:
    return json.dumps(asked, sort_keys=True, separators=(",", ":"), default=str)


def _legacy_fingerprint(operation: str, params: Mapping[str, Any] | None) -> str:
    text = _standard_text([operation, _asked(params)])
    return hashlib.sha256(text.encode()).hexdigest()


def record_id(account_id: str, operation: str, key: str) -> str:
    """The id of the stored record of ``key`` (its scope is the account and the operation)."""
    return hashlib.sha256(f"{account_id}\x00{operation}\x00{key}".encode()).hexdigest()


def read_ahead(ctx: Context, keys: Iterable[tuple[str, str]]) -> None:
    """Read the stored records of several (operation, key) pairs at once, when the store can.

    A bulk request does, so that each item's look-up is answered without a query of its own.
    """
    ctx.tables.idempotency_keys.read_ahead(
        [record_id(ctx.account_id, operation, key) for operation, key in keys]
    )


class IdempotentRequest:
    """A write sent with an idempotency key: its stored record's id and its fingerprint."""

    __slots__ = ("_params", "digest", "key", "operation", "record_id")

    def __init__(
        self, account_id: str, operation: str, key: str, params: Mapping[str, Any] | None
    ) -> None:
        self.operation = operation
        self.key = key
        self.record_id = record_id(account_id, operation, key)
        self.digest = fingerprint(operation, params)
        self._params = params

    def replay(self, ctx: Context) -> dict[str, Any] | None:
        """The stored response for this key, None when unused; a different request is refused."""
        stored = ctx.tables.idempotency_keys.get(self.record_id)
        if stored is None:
            return None
        if not same_request(stored["fingerprint"], self.digest, self.operation, self._params):
            raise key_already_used(self.key, self.operation)
        return unpack_response(stored)

    def remember(self, ctx: Context, response: dict[str, Any]) -> None:
        """Store a successful response under the key, without the secrets it shows once."""
        _keep(ctx, self.record_id, self.operation, self.digest,
              pack_response(_without_secrets(response)))


def same_request(
    stored: str, digest: str, operation: str, params: Mapping[str, Any] | None
) -> bool:
    """Whether a stored fingerprint is that of this request (``digest``, its :func:`fingerprint`).

    A fingerprint stored by an older version is compared with the digest that version made.
    """
    if stored.startswith(_VERSION):
        return stored == digest
    return stored == _legacy_fingerprint(operation, params)


def key_already_used(key: str, operation: str) -> IdempotencyKeyAlreadyUsed:
    """The error for ``key`` sent again with another ``operation`` request than it was first."""
    return IdempotencyKeyAlreadyUsed(
        f"idempotency key {key!r} was already used with a different {operation} request"
    )


def _keep(
    ctx: Context, record: str, operation: str, digest: str, response: dict[str, Any]
) -> None:
    """Store the record ``record`` of a request: its digest and what it keeps of its response."""
    ctx.tables.idempotency_keys.put({
        "id": record,
        "account_id": ctx.account_id,
        "operation": operation,
        "fingerprint": digest,
        **response,
        "inserted_at": format_timestamp(ctx.now),
    })


def pack_response(response: dict[str, Any]) -> dict[str, Any]:
    """The members a record keeps ``response`` in: packed (``z1``) or, when no smaller, as is.

    Packed is the compact JSON text deflated with a fixed dictionary, in Base64 (which JSON
    holds without escapes); :func:`unpack_response` answers the same value.
    """
    text = jsontext.dumps(response).encode()
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=_DICTIONARY_1)
    packed = base64.b64encode(packer.compress(text) + packer.flush())
    if len(packed) >= len(text):
        return {"response": response}
    return {_PACKED: packed.decode("ascii")}


def unpack_response(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The response a record keeps (see :func:`pack_response`; older records keep it as is)."""
    packed = stored.get(_PACKED)
    if packed is None:
        response: dict[str, Any] = stored["response"]
        return response
    unpacker = zlib.decompressobj(-zlib.MAX_WBITS, zdict=_DICTIONARY_1)
    text = unpacker.decompress(base64.b64decode(packed, validate=True)) + unpacker.flush()
    unpacked: dict[str, Any] = jsontext.loads(text)
    return unpacked


def purge_expired_keys(
    store: Store, now: datetime, keep_for: timedelta = KEEP_FOR, *, batch: int = PURGE_BATCH
) -> int:
    """Delete the records stored before ``now - keep_for``; how many were deleted.

    Each transaction deletes at most ``batch`` records (the oldest first), so other writers
    wait for one short transaction at a time; it goes on until none is left. A server calls it
    periodically (``governance serve`` does), an embedder may too. ``keep_for`` under 24 hours
    is ``ValueError`` naming it (decisions 5: keys are kept at least 24 hours).
    """
    if keep_for < KEEP_FOR:
        raise ValueError(f"keep_for must be at least {KEEP_FOR}, not {keep_for}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, not {batch!r}")
    cutoff = [Filter("inserted_at", "lt", format_timestamp(now - keep_for))]
    keys = Tables(store).idempotency_keys
    deleted = 0
    while True:
        with store.transaction():
            expired = keys.query(cutoff, sort=[SortKey("inserted_at")], limit=batch)
            for record in expired:
                deleted += keys.delete(record["id"])
        if len(expired) < batch:
            return deleted


def _without_secrets(response: dict[str, Any]) -> dict[str, Any]:
    """``response`` with its :class:`ShownOnce` secrets withheld.

    A secret stands beside ``details`` or among its members, so only those two levels are
    looked at, and nothing is copied when there is none (the common case).
    """
    for value in response.values():
        # By exact type, in C: ShownOnce has no subclasses.
        if type(value) is ShownOnce or (
            type(value) is dict and ShownOnce in map(type, value.values())
        ):
            withheld: dict[str, Any] = withhold_secrets(response)
            return withheld
    return response
