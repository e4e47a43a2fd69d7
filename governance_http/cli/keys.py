"""The encryption key of sensitive values: making it, rotating it, encrypting values again.

A SQLite store's key lives in a file beside it (``governance.db.key``, mode 0600), which
``init``, ``serve`` and ``demo`` make when the store has no key. A PostgreSQL store has no
place beside it: its key comes from ``$GOVERNANCE_ENCRYPTION_KEY`` or the file
``$GOVERNANCE_ENCRYPTION_KEY_FILE`` names, and ``serve`` refuses to start without one
(``docs/serving.md``, "Encryption key"). No command prints a key but ``keys new`` and ``init``
on such a store, where printing it is the only way to hand it over.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from governance_core.domain.sensitive_values import REKEY_BATCH, rekey
from governance_core.encryption import (
    FernetCipher,
    generate_key,
    read_key_file,
    write_key_file,
)
from governance_core.errors import InvalidValue
from governance_core.service import Governance
from governance_http.cli.output import CommandError
from governance_http.cli.stores import open_store
from governance_http.settings import (
    ENCRYPTION_KEY_FILE_VARIABLE,
    ENCRYPTION_KEY_VARIABLE,
    default_db,
    encryption_key,
    key_file,
    shown_location,
)

__all__ = [
    "REKEY_BATCH",
    "ensure_key",
    "keys_new",
    "keys_rekey",
    "keys_rotate",
    "made_key_line",
    "needs_key_message",
    "new_key_for_init",
    "stored_before_key",
]


def _db_option(db: str) -> str:
    return "" if db == default_db() else f" --db {shlex.quote(shown_location(db))}"


def needs_key_message(db: str) -> str:
    """Why a store without a file beside it cannot go on without a key, and how to give one."""
    return (
        f"the store {shown_location(db)} keeps sensitive values encrypted and has no "
        f"encryption key: set {ENCRYPTION_KEY_VARIABLE} to a key made by `governance keys new` "
        f"(keep it in your secret store), or {ENCRYPTION_KEY_FILE_VARIABLE} to the path of a "
        "file holding it (mode 0600)"
    )


def _configured(db: str) -> bool:
    try:
        return encryption_key(db) is not None
    except InvalidValue as error:
        raise CommandError(error.message) from error


def _new_key() -> str:
    try:
        return generate_key()
    except ImportError as error:
        raise CommandError(str(error)) from error


def ensure_key(db: str) -> Path | None:
    """Make the key file of a SQLite store that has no key; the path made, else None.

    A store with a key configured is left alone. A store without a file beside it (a URL)
    and without a key is refused with how to set one.
    """
    if _configured(db):
        return None
    path = key_file(db)
    if path is None:
        raise CommandError(needs_key_message(db))
    try:
        write_key_file(path, [_new_key()])
    except FileExistsError:
        return None  # another process made it meanwhile; it is the store's key
    return path


def new_key_for_init(db: str) -> dict[str, str]:
    """What ``init`` reports about the key: the key file it made, or a key to keep.

    A store without a file beside it gets a new key printed once (``encryption_key``), the
    way its first token is; the operator sets ``$GOVERNANCE_ENCRYPTION_KEY`` to it.
    """
    if _configured(db):
        return {}
    if key_file(db) is None:
        return {"encryption_key": _new_key()}
    made = ensure_key(db)
    return {} if made is None else {"encryption_key_file": str(made)}


def made_key_line(path: Path) -> str:
    """The line saying a key file was made; the key itself is never printed."""
    return (f"encryption key: made {path} (mode 0600); back it up with the store: "
            "without it the sensitive values cannot be read")


def stored_before_key(gov: Governance, db: str) -> str | None:
    """A hint to run ``keys rekey`` when the store already holds values and secrets, else None.

    Asked when a key was just made for a store that existed: what it holds was stored in
    plain.
    """
    values, destinations = gov.tables.sensitive_values.count(), gov.tables.destinations.count()
    if not values and not destinations:
        return None
    return (f"{values} record(s) of sensitive values and {destinations} webhook "
            f"destination(s) were stored before this key: encrypt them with "
            f"`governance keys rekey{_db_option(db)}`")


def keys_new(args: argparse.Namespace) -> int:
    """Print a new key, for ``$GOVERNANCE_ENCRYPTION_KEY`` or a key file; nothing else."""
    print(_new_key())
    return 0


def keys_rotate(args: argparse.Namespace) -> int:
    """Put a new key first in the store's key file; the earlier keys stay, to decrypt."""
    if os.environ.get(ENCRYPTION_KEY_VARIABLE, "").strip():
        raise CommandError(
            f"the key comes from {ENCRYPTION_KEY_VARIABLE}: put a new key (from `governance "
            f"keys new`) first in it, then a comma and the current keys; restart the servers, "
            f"then run `governance keys rekey{_db_option(args.db)}`"
        )
    path = key_file(args.db)
    if path is None:
        raise CommandError(needs_key_message(args.db))
    if not path.exists():
        raise CommandError(
            f"no key file at {path}: `governance serve` or `governance init` makes one"
        )
    earlier = read_key_file(path).split(",")
    write_key_file(path, [_new_key(), *earlier], replace=True)
    if args.json:
        print(json.dumps({"key_file": str(path), "keys": len(earlier) + 1}))
        return 0
    print(f"{path}: a new key is first and encrypts from now on; the {len(earlier)} earlier "
          f"key(s) still decrypt. Restart the servers of this store, then run "
          f"`governance keys rekey{_db_option(args.db)} --drop-old-keys`")
    return 0


def _drop_old_keys(db: str, cipher: FernetCipher) -> str:
    """Keep only the first key in the key file; what was done, as a line to print."""
    if cipher.key_count == 1:
        return "one key is configured: nothing to drop"
    if os.environ.get(ENCRYPTION_KEY_VARIABLE, "").strip():
        return (f"every value is under the first key: remove the others from "
                f"{ENCRYPTION_KEY_VARIABLE} and restart the servers")
    path = key_file(db)
    assert path is not None, "a configured key without the variable comes from a file"
    first = read_key_file(path).split(",")[0]
    write_key_file(path, [first], replace=True)
    return f"{path} now holds only the first key"


def keys_rekey(args: argparse.Namespace) -> int:
    """Encrypt every sensitive value and webhook secret under the first key, in batches.

    Values stored in plain (before the store had a key) and values under the other
    configured keys are rewritten; running it again finishes an interrupted run.
    ``--drop-old-keys`` then keeps only the first key in the key file, once a second pass
    finds nothing left under another key.
    """
    if args.batch_size < 1:
        raise CommandError("--batch-size must be at least 1")
    made = ensure_key(args.db)
    if made is not None:
        print(made_key_line(made), file=sys.stderr if args.json else sys.stdout)
    with open_store(args.db) as gov:
        cipher = gov.config.cipher
        assert isinstance(cipher, FernetCipher), "ensure_key leaves a key configured"
        done = rekey(gov.store, cipher, batch_size=args.batch_size)
        dropped = None
        if args.drop_old_keys:
            again = rekey(gov.store, cipher, batch_size=args.batch_size)
            if again.values_rewritten or again.destinations_rewritten:
                raise CommandError(
                    "values were written under an earlier key while this ran: a server "
                    "still runs without the new key; restart it, then run this again"
                )
            dropped = _drop_old_keys(args.db, cipher)
    if args.json:
        print(json.dumps({
            "values_read": done.values_read, "values_rewritten": done.values_rewritten,
            "destinations_read": done.destinations_read,
            "destinations_rewritten": done.destinations_rewritten,
            "dropped_old_keys": dropped,
        }))
        return 0
    print(f"sensitive values: {done.values_rewritten} of {done.values_read} record(s) "
          f"encrypted again under the first key")
    print(f"webhook secrets: {done.destinations_rewritten} of {done.destinations_read} "
          f"destination(s) encrypted again under the first key")
    if dropped is not None:
        print(dropped)
    return 0
