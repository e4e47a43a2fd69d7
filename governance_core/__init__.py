"""Record runs of software agents and govern them: the embeddable core.

Everything an embedder needs is importable from here: the :class:`Governance` facade and its
typed :class:`Session`, the error hierarchy, the storage port with its reference adapters,
clocks and id factories for deterministic tests, the run recorder and the value ciphers.
The PostgreSQL adapter needs the ``postgres`` extra and is imported from its own module, so
importing this package never requires a database driver.
"""

from governance_core.client import UNSET, AccountOperations, Issued, Unset
from governance_core.clock import Clock, FixedClock, SystemClock, format_timestamp, parse_timestamp
from governance_core.context import Config, Principal
from governance_core.encryption import (
    EncryptionKeyMissing,
    FernetCipher,
    NoKeyCipher,
    PlaintextForTests,
    ValueCipher,
    generate_key,
)
from governance_core.errors import (
    AlertAlreadyCleared,
    AlertUnknown,
    BadAuthToken,
    BadRequest,
    Conflict,
    FieldErrors,
    GovernanceError,
    IdempotencyKeyAlreadyUsed,
    InvalidAction,
    InvalidValue,
    NotAuthenticated,
    NotFound,
    NotImplementedOperation,
    NotPermitted,
    RequiredValue,
    TemporarilyUnavailable,
    UnexpectedError,
    UnexpectedRefType,
    UnknownError,
    ValidationErrors,
    WriteConflict,
)
from governance_core.ids import IdFactory, SeededIds, is_pfid
from governance_core.policies import ActionDenied, ApprovalTimedOut
from governance_core.recording import Run, RunTerminated, SpanRecorder
from governance_core.service import Bootstrap, Governance, Session
from governance_core.storage import Filter, MemoryStore, Record, SortKey, SQLiteStore, Store

__all__ = [
    "AccountOperations",
    "ActionDenied",
    "AlertAlreadyCleared",
    "AlertUnknown",
    "ApprovalTimedOut",
    "BadAuthToken",
    "BadRequest",
    "Bootstrap",
    "Clock",
    "Config",
    "Conflict",
    "EncryptionKeyMissing",
    "FernetCipher",
    "FieldErrors",
    "Filter",
    "FixedClock",
    "Governance",
    "GovernanceError",
    "IdFactory",
    "IdempotencyKeyAlreadyUsed",
    "InvalidAction",
    "InvalidValue",
    "Issued",
    "MemoryStore",
    "NoKeyCipher",
    "NotAuthenticated",
    "NotFound",
    "NotImplementedOperation",
    "NotPermitted",
    "PlaintextForTests",
    "Principal",
    "Record",
    "RequiredValue",
    "Run",
    "RunTerminated",
    "SQLiteStore",
    "SeededIds",
    "Session",
    "SortKey",
    "SpanRecorder",
    "Store",
    "SystemClock",
    "TemporarilyUnavailable",
    "UNSET",
    "UnexpectedError",
    "UnexpectedRefType",
    "UnknownError",
    "Unset",
    "ValidationErrors",
    "ValueCipher",
    "WriteConflict",
    "format_timestamp",
    "generate_key",
    "is_pfid",
    "parse_timestamp",
]
