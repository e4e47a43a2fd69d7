"""The logical schema: every table and the fields adapters must be able to filter and sort on.

Every record is stored whole; the declared fields are also kept where the adapter can index
them. A resource's table takes its fields from its model, where each is declared a column or
not (:mod:`governance_core.models.description`); the tables no model describes name theirs
here. Adding a column is a migration each adapter performs by itself on open; bump
``SCHEMA_VERSION`` with it, so that older code refuses a file whose new columns it would leave
stale.
"""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.models import accounts, agents, notifications, policies
from governance_core.models.description import ColumnType, description_of, stored_columns

__all__ = [
    "DAY_COSTS",
    "IDS",
    "SCHEMA_VERSION",
    "STORE_KEPT",
    "TABLES",
    "TOOL_CALLS_NUMBERED_IN",
    "TOOL_CALL_NUMBERS",
    "Column",
    "ColumnType",
    "Table",
    "Where",
    "column_names",
    "day_cost_id",
    "kinded_tables",
]


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
    while the count stays the same (the tokens and accounts every call authenticates with, and
    the risk profiles and policies every span write and decision applies; see
    :class:`~governance_core.storage.protocol.ChangeMarks`).

    ``index_each`` indexes every declared field on its own besides ``indexes``; a table
    written on every span (spans, runs) indexes only what its lists filter and sort on, since
    each index is one more B-tree every write updates. ``partial`` adds indexes that hold only
    the rows a :class:`Where` names.

    ``kind``: the table holds resources of that kind (their ``type``), whose ids the store
    records in :data:`IDS` as it inserts them (see there).

    ``rewrites_indexed``: a rewrite of a record almost always changes an indexed field (the
    ``run_models`` rows, whose tokens are in their one index), so an adapter need not first
    try a rewrite that leaves the indexes alone.
    """

    name: str
    columns: tuple[Column, ...]
    indexes: tuple[tuple[str, ...], ...] = ()
    index_each: bool = True
    marked: bool = False
    partial: tuple[tuple[tuple[str, ...], Where], ...] = ()
    kind: str | None = None
    rewrites_indexed: bool = False

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
    kind: str | None = None,
    rewrites_indexed: bool = False,
) -> Table:
    columns = []
    for field in ("account_id", "inserted_at", *fields):
        column_name, _, column_type = field.partition(":")
        columns.append(Column(column_name, column_type or "text"))  # type: ignore[arg-type]
    return Table(
        name, tuple(columns), indexes, index_each, marked, partial, kind, rewrites_indexed
    )


IDS = "ids"
"""The table of every resource id in use: ``{"id", "kind", "account_id"}`` a record.

The store writes it, never the core: inserting a record into a table with a ``kind`` also
inserts that id's record here, in the same transaction, unless this table holds the id
already; deleting the record deletes the id's record when its kind is the table's. So whether
an id is taken, and by which kind of resource, is one read by primary key, whatever the number
of resource tables (the core stores each id in one table only). ``account_id`` is the
resource's (null when it has none).
"""


DAY_COSTS = "agent_day_costs"
"""The cost of each agent's runs per UTC day they started: ``{"id", "agent_id", "day",
"total_cost"}`` a record, its id :func:`day_cost_id`'s.

The store keeps it, never the core, as it keeps :data:`IDS`: every write of a run
(``agent_instances``) that changes its ``total_cost``, ``started_at`` or ``agent_id``, and
every insert and delete of one, moves the run's cost from the record of the day it stood
under to the one it stands under now, in the same statement. ``day`` is the first ten
characters of ``started_at`` (``YYYY-MM-DD``); a run without a start or a cost counts
nowhere. So an agent's cost of the day (a daily budget's ``cost_today_micro_usd``) is one
read by primary key, however many runs it started that day.
"""


def day_cost_id(agent_id: str, day: str) -> str:
    """The id of ``agent_id``'s record in :data:`DAY_COSTS` for ``day`` (``YYYY-MM-DD``)."""
    return f"{agent_id}/{day}"


def _resource(
    name: str, model: type, *, records_ids: bool = True, **options: Any
) -> Table:
    """A resource's table: its model's columns and, when its ids go in :data:`IDS`, its kind."""
    kind = description_of(model).kind if records_ids else None
    return _t(name, *stored_columns(model), kind=kind, **options)


TABLES: dict[str, Table] = {
    table.name: table for table in (
        _resource("accounts", accounts.Account, marked=True),
        _resource("admin_users", accounts.AdminUser),
        _resource("admin_user_invites", accounts.AdminUserInvite),
        _resource("api_tokens", accounts.ApiToken, marked=True),
        _resource("people", accounts.Person),
        _resource("teams", accounts.Team),
        _resource("team_memberships", accounts.TeamMembership, records_ids=False),
        _resource("environments", accounts.Environment),
        _resource("risk_profiles", accounts.RiskProfile, marked=True),
        _resource(
            "agents", agents.Agent,
            # Every span that moves its run's last activity rewrites the agent: an index on
            # last_activity_span_at (or on every field) would be rewritten with it.
            indexes=(
                ("account_id", "external_identifier"), ("account_id", "status"),
                ("team_id",), ("owner_person_id",), ("risk_profile_id",),
            ),
            index_each=False,
        ),
        _resource("agent_versions", agents.AgentVersion),
        _resource("agent_schema_versions", agents.AgentSchemaVersion),
        _resource("agent_deployments", agents.AgentDeployment),
        _resource(
            "agent_instances", agents.AgentInstance,
            # risk_level and total_cost are kept on span writes for the console's figures over
            # many runs: its counts and plots read the started_at range of the first index
            # below alone (it holds every field they group and sum, so no row is read: a third
            # of the time of reading the rows at 100,000 runs), its risk filter the second.
            indexes=(
                ("account_id", "status"), ("agent_id", "status"),
                ("agent_id", "external_identifier"), ("environment_id",),
                # An agent's runs started on a day before a judged one (a daily budget's cost
                # as back-testing reads it, that run left out): never all its runs, and no
                # row read (the cost and the id are in the index). A decide reads DAY_COSTS.
                ("agent_id", "started_at", "total_cost", "id"),
                ("agent_deployment_id",),
                ("account_id", "started_at", "status", "risk_level", "total_cost"),
                ("account_id", "risk_level", "started_at"),
                # The trends page's figures per day: one grouped query reads this index in
                # its order (no row, no sort), the agent and environment filters included.
                ("account_id", "started_day", "status", "duration_bucket", "risk_level",
                 "total_cost", "agent_id", "environment_id", "quality_score"),
                # The runs list: its sorts by duration and cost, and the count of any of its
                # filters from one index (no row read). Every field of these changes only in
                # writes that change an indexed field already (register, start, finish,
                # usage, level, quality); a span count changes on every span, so its sort has none
                # (it would cost every span write a rewrite of every index of the run).
                ("account_id", "duration_ms", "started_at"),
                ("account_id", "total_cost", "started_at"),
                ("account_id", "agent_id", "environment_id", "status", "purpose",
                 "risk_level", "started_at", "duration_ms", "total_cost",
                 "external_identifier", "quality_score"),
                # An external identifier prefix (set once, at registration).
                ("account_id", "external_identifier"),
                # The runs of a conversation or of an end user, in start order, and the
                # sessions page's grouped query. Each is set once in a run's life (a span
                # write sets it only while the run has none).
                ("account_id", "session_id", "started_at"),
                ("account_id", "user_id", "started_at"),
                # The sort by span count: by its bucket (a handful of rows share the top
                # buckets, sorted by the count itself), since the count moves on every span
                # and would cost every span write a rewrite of every index of the run.
                ("account_id", "span_bucket", "started_at"),
            ),
            index_each=False,
        ),
        _resource(
            "agent_spans", agents.AgentSpan,
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
        _resource(
            "alerts", agents.Alert,
            indexes=(("agent_instance_id", "name"),),
        ),
        # A run's token usage and cost per model, kept where its usage moves, so that the
        # trends page sums tokens and cost per model and day with one grouped query.
        _t(
            "run_models", "agent_instance_id", "agent_id", "environment_id", "started_day",
            "model_name", "input_tokens:integer", "output_tokens:integer", "cost:real",
            indexes=(
                ("account_id", "started_day", "model_name", "input_tokens", "output_tokens",
                 "cost", "agent_id", "environment_id"),
            ),
            index_each=False,
            rewrites_indexed=True,
        ),
        _t("sensitive_values", "owner_id"),
        # Read by id; the index on inserted_at finds the records past their window.
        _t("idempotency_keys", "operation", indexes=(("inserted_at",),), index_each=False),
        _t("console_sessions", "token_id", "expires_at"),
        _t("console_secrets", "purpose"),
        _t("sensitive_reveals", "owner_id", "token_id"),
        # Notifications: the outbox (events and their deliveries), its log, monitors, and
        # the lease that keeps one sender per database.
        _resource("destinations", notifications.Destination, records_ids=False),
        _resource("notification_events", notifications.NotificationEvent, records_ids=False),
        _resource(
            "deliveries", notifications.Delivery, records_ids=False,
            indexes=(("destination_id", "status"),),
        ),
        _resource("delivery_attempts", notifications.DeliveryAttempt, records_ids=False),
        _resource("monitors", notifications.Monitor, records_ids=False),
        _t("sender_leases", "holder", "expires_at"),
        # Runtime governance (governance_core.policies): policies, the decisions taken
        # before an agent acts, and the approvals that hold an action for a person. Every
        # decision sums the account's policy versions from the first index (one indexed
        # read tells whether any policy changed); a run's allowed tool calls are counted by
        # the last one's number, at the end of its range of the second. Nothing looks
        # decisions up by their approval (the approval names its decision), so no index
        # holds it: each one is one more B-tree page every decision writes.
        _resource(
            "policies", policies.Policy, marked=True,
            indexes=(("account_id", "version"),),
        ),
        _resource(
            "decisions", policies.Decision,
            indexes=(
                ("agent_instance_id", "action_kind", "outcome", "tool_call_number"),
                ("account_id", "decided_at"),
            ),
            index_each=False,
        ),
        _resource(
            "approvals", policies.Approval,
            indexes=(
                ("account_id", "status", "expires_at"), ("agent_instance_id", "digest", "status"),
            ),
            index_each=False,
        ),
        # No index besides the primary key: these tables are only ever read by id.
        Table(IDS, (Column("kind"), Column("account_id")), index_each=False),
        Table(
            DAY_COSTS, (Column("agent_id"), Column("day"), Column("total_cost", "real")),
            index_each=False,
        ),
    )
}

STORE_KEPT: frozenset[str] = frozenset({IDS, DAY_COSTS})
"""The tables the store writes itself, as the records of other tables are written: the core
only reads them, and nothing read of them ahead of a write stays true after it."""

SCHEMA_VERSION = 10
"""Version 4 added the :data:`IDS` table, filled from the resource tables as a store opens;
version 5 the runs' duration and span count rollups and the ``run_models`` table; version 6
the runs' ``session_id`` and ``user_id`` (backfilled from the stored records as a store
opens) and ``span_bucket`` (a run written before it gets one with its next write); version 7
SQLite's rows that keep a declared field in its column alone (older libraries would read
``null`` there, so they refuse such a file); version 8 counts the changes of risk profiles and
policies; version 9 numbers a run's allowed tool calls (``decisions.tool_call_number``: older
libraries would store calls unnumbered, which the count would miss); version 10 the
:data:`DAY_COSTS` the store keeps (older libraries would not keep them)."""


TOOL_CALLS_NUMBERED_IN = 9
"""The schema version from which a run's allowed tool calls are stored numbered: a store
opened from an older one has its stored calls numbered (:data:`TOOL_CALL_NUMBERS`)."""
TOOL_CALL_NUMBERS = (
    "SELECT id, row_number() OVER (PARTITION BY agent_instance_id ORDER BY decided_at, id)"
    " AS number FROM decisions WHERE action_kind = 'tool_call' AND outcome = 'allow'"
)
"""Each stored allowed tool call's id and number (1 for its run's first): a query SQLite and
PostgreSQL both run."""


def kinded_tables() -> list[Table]:
    """The tables with a resource ``kind``, in declaration order (their ids are in :data:`IDS`)."""
    return [table for table in TABLES.values() if table.kind is not None]


def column_names(table: str) -> frozenset[str]:
    """Return the fields of ``table`` that may be filtered and sorted on (``id`` included)."""
    return frozenset({"id", *(c.name for c in TABLES[table].columns)})
