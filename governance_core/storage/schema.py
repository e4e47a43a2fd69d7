"""The logical schema: every table and the fields adapters must be able to filter and sort on.

Every record is stored whole; the declared fields are also kept where the adapter can index
them. Adding a field here is a migration each adapter performs by itself on open; bump
``SCHEMA_VERSION`` with it, so that older code refuses a file whose new columns it would leave
stale.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = [
    "SCHEMA_VERSION", "TABLES", "Column", "ColumnType", "Table", "Where", "column_names",
]

ColumnType = Literal["text", "integer", "real"]
"""What a declared field holds: text, a 64-bit integer (booleans too) or a float."""


@attrs.frozen
class Column:
    """A declared field of a table."""

    name: str
    type: ColumnType = "text"


@attrs.frozen
class Where:
    """The rows a partial index holds: those whose ``field`` holds a value, or is null.

    A write that leaves a row outside an index leaves that index alone: a span is in either
    the index of top-level spans or the index of children, never both.
    """

    field: str
    is_set: bool

    @property
    def suffix(self) -> str:
        """What an index's name ends with: ``set_<field>`` or ``null_<field>``."""
        return f"{'set' if self.is_set else 'null'}_{self.field}"

    @property
    def test(self) -> str:
        """The SQL test of the field's value: ``IS NOT NULL`` or ``IS NULL``."""
        return "IS NOT NULL" if self.is_set else "IS NULL"


@attrs.frozen
class Table:
    """A table: its declared fields and the indexes worth keeping.

    ``marked``: the store counts the table's changes, so that what is read of it can be kept
    while the count stays the same (the tokens and accounts every call authenticates with; see
    :class:`~governance_core.storage.protocol.ChangeMarks`).

    ``index_each`` indexes every declared field on its own besides ``indexes``; a table
    written on every span (spans, runs) indexes only what its lists filter and sort on, since
    each index is one more B-tree every write updates. ``partial`` adds indexes that hold only
    the rows a :class:`Where` names.
    """

    name: str
    columns: tuple[Column, ...]
    indexes: tuple[tuple[str, ...], ...] = ()
    index_each: bool = True
    marked: bool = False
    partial: tuple[tuple[tuple[str, ...], Where], ...] = ()

    def wanted_indexes(self) -> list[tuple[str, ...]]:
        """Every index of the table, partial ones included, as tuples of field names."""
        single = [(column.name,) for column in self.columns] if self.index_each else []
        declared = [*self.indexes, *(fields for fields, _ in self.partial)]
        return single + [index for index in declared if index not in single]

    def where(self, index: tuple[str, ...]) -> Where | None:
        """The rows ``index`` holds when it is partial, else None (every row)."""
        return next((where for fields, where in self.partial if fields == index), None)

    def index_words(self, index: tuple[str, ...]) -> tuple[str, ...]:
        """What an adapter names ``index`` after: its fields, then a partial index's rows."""
        where = self.where(index)
        return index if where is None else (*index, where.suffix)

    def indexed_fields(self) -> set[str]:
        """Every field an index holds or a partial index's rows depend on."""
        return {
            *(name for index in self.wanted_indexes() for name in index),
            *(where.field for _, where in self.partial),
        }


def _t(
    name: str,
    *fields: str,
    indexes: tuple[tuple[str, ...], ...] = (),
    index_each: bool = True,
    marked: bool = False,
    partial: tuple[tuple[tuple[str, ...], Where], ...] = (),
) -> Table:
    columns = []
    for field in ("account_id", "inserted_at", *fields):
        column_name, _, column_type = field.partition(":")
        columns.append(Column(column_name, column_type or "text"))  # type: ignore[arg-type]
    return Table(name, tuple(columns), indexes, index_each, marked, partial)


TABLES: dict[str, Table] = {
    table.name: table
    for table in (
        _t(
            "accounts", "name", "purpose", "promo_code", "website", "partition:integer",
            marked=True,
        ),
        _t("admin_users", "email", "name", "job_title", "last_active_at", "profile_completed_at"),
        _t("admin_user_invites", "email", "status", "token_hash", "expires_at"),
        _t(
            "api_tokens", "token_hash", "status", "token_scope", "last_used_at", "expires_at",
            "admin_user_id", "agent_id", "environment_id", marked=True,
        ),
        _t("people", "name", "email"),
        _t("teams", "name"),
        _t("team_memberships", "team_id", "person_id"),
        _t("environments", "name", "purpose", "external_identifier", "is_default:integer"),
        _t("risk_profiles", "name", "is_default:integer"),
        _t(
            "agents", "name", "status", "external_identifier", "owner_person_id", "team_id",
            "risk_profile_id", "last_activity_span_at",
            # Every span that moves its run's last activity rewrites the agent: an index on
            # last_activity_span_at (or on every field) would be rewritten with it.
            indexes=(
                ("account_id", "external_identifier"), ("account_id", "status"),
                ("team_id",), ("owner_person_id",), ("risk_profile_id",),
            ),
            index_each=False,
        ),
        _t("agent_versions", "agent_id", "external_identifier", "agent_schema_version_id"),
        _t("agent_schema_versions", "agent_id", "external_identifier", "content_hash"),
        _t("agent_deployments", "agent_id", "environment_id", "current_version_id"),
        _t(
            "agent_instances", "agent_id", "agent_version_id", "agent_deployment_id",
            "environment_id", "external_identifier", "status", "purpose", "started_at",
            "finished_at", "last_activity_span_at", "risk_level", "total_cost:real",
            # risk_level and total_cost are kept on span writes for the console's figures over
            # many runs: its counts and plots read the started_at range of the first index
            # below alone (it holds every field they group and sum, so no row is read: a third
            # of the time of reading the rows at 100,000 runs), its risk filter the second.
            indexes=(
                ("account_id", "status"), ("agent_id", "status"),
                ("agent_id", "external_identifier"), ("environment_id",),
                ("agent_deployment_id",),
                ("account_id", "started_at", "status", "risk_level", "total_cost"),
                ("account_id", "risk_level", "started_at"),
            ),
            index_each=False,
        ),
        _t(
            "agent_spans", "agent_instance_id", "agent_id", "parent_span_id", "schema_name",
            "status", "purpose", "started_at", "finished_at",
            # The last serves a run's spans of one status (the console's "failed spans") in
            # time order, and counts a run's spans (status in every status) from the index
            # alone. It leads with the status so that SQLite never takes it for a query of
            # the tree, which names no status: the indexes below serve those.
            indexes=(
                ("agent_instance_id", "started_at"), ("agent_id", "started_at"),
                ("status", "account_id", "agent_instance_id", "started_at"),
            ),
            index_each=False,
            # A span is in one of these two: the children of a span, or a run's top-level
            # spans (it leads with the account, so SQLite picks it for the console's tree).
            partial=(
                (("parent_span_id", "started_at"), Where("parent_span_id", is_set=True)),
                (
                    ("account_id", "agent_instance_id", "started_at"),
                    Where("parent_span_id", is_set=False),
                ),
            ),
        ),
        _t(
            "alerts", "agent_instance_id", "agent_id", "environment_id", "name", "status",
            "severity", "raised_at", "cleared_at",
            indexes=(("agent_instance_id", "name"),),
        ),
        _t("sensitive_values", "owner_id"),
        _t("idempotency_keys", "operation", index_each=False),
        _t("console_sessions", "token_id", "expires_at"),
        _t("console_secrets", "purpose"),
        _t("sensitive_reveals", "owner_id", "token_id"),
        # Notifications: the outbox (events and their deliveries), its log, monitors, and
        # the lease that keeps one sender per database.
        _t("destinations", "name", "status", "url"),
        _t("notification_events", "event_type", "subject_id", "occurred_at"),
        _t(
            "deliveries", "destination_id", "event_id", "event_type", "status",
            "next_attempt_at",
            indexes=(("destination_id", "status"),),
        ),
        _t("delivery_attempts", "delivery_id", "destination_id", "attempted_at"),
        _t(
            "monitors", "name", "status", "metric", "agent_id", "environment_id", "level",
            "next_evaluation_at",
        ),
        _t("sender_leases", "holder", "expires_at"),
    )
}

SCHEMA_VERSION = 2


def column_names(table: str) -> frozenset[str]:
    """Return the fields of ``table`` that may be filtered and sorted on (``id`` included)."""
    return frozenset({"id", *(c.name for c in TABLES[table].columns)})
