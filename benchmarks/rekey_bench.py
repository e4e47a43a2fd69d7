"""How fast ``governance keys rekey`` encrypts the sensitive values of a SQLite store.

Run: ``python benchmarks/rekey_bench.py [--records 20000] [--batch-size 500] [--rounds 3]``.

Each round fills a new SQLite file with ``--records`` records of sensitive values as earlier
versions stored them without a key (base64 of the JSON, about 200 bytes), then times
:func:`governance_core.domain.sensitive_values.rekey` encrypting them all under a new key,
then a second run finding nothing left to do (what an interrupted run's restart pays for the
records already done). The baseline is raw sqlite3 doing the least the same work needs:
read each row, Fernet-encrypt its value, write it back, one transaction a batch.

The goal: at least 1,000 records a second (a million in under 17 minutes), and at least half
the baseline's rate.
"""

from __future__ import annotations

import argparse
import base64
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from cryptography.fernet import Fernet

from governance_core.domain.sensitive_values import rekey
from governance_core.encryption import FernetCipher, generate_key
from governance_core.storage.sqlite import SQLiteStore

GOAL_RATE = 1000.0
GOAL_RATIO = 0.5
VALUE = {"payload": {"/applicant/national_id": "QQ123456C", "/applicant/date_of_birth":
                     "1988-03-14", "/notes": "x" * 60}}


def fill(path: Path, records: int) -> None:
    """A store holding ``records`` records of values stored in plain."""
    store = SQLiteStore(path)
    plain = base64.b64encode(json.dumps(VALUE).encode()).decode("ascii")
    with store.transaction():
        for number in range(records):
            store.put("sensitive_values", {
                "id": f"v{number:09d}", "account_id": "a", "owner_id": f"s{number:09d}",
                "inserted_at": "2026-01-01T00:00:00.000000Z",
                "updated_at": "2026-01-01T00:00:00.000000Z", "ciphertext": plain,
            })
    store.close()


def library(path: Path, batch_size: int) -> tuple[float, float]:
    """Seconds for a rekey of everything, then for a second run that finds nothing to do."""
    store = SQLiteStore(path)
    cipher = FernetCipher(generate_key())
    started = time.perf_counter()
    done = rekey(store, cipher, batch_size=batch_size)
    first = time.perf_counter() - started
    started = time.perf_counter()
    again = rekey(store, cipher, batch_size=batch_size)
    second = time.perf_counter() - started
    store.close()
    assert done.values_rewritten == done.values_read and again.values_rewritten == 0
    return first, second


def baseline(path: Path, batch_size: int) -> float:
    """Seconds for raw sqlite3 to read, encrypt and rewrite every row, a batch a transaction."""
    fernet = Fernet(Fernet.generate_key())
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    started = time.perf_counter()
    after = ""
    while True:
        db.execute("BEGIN IMMEDIATE")
        rows = db.execute(
            "SELECT id, data FROM sensitive_values WHERE id > ? ORDER BY id LIMIT ?",
            (after, batch_size),
        ).fetchall()
        for record_id, data in rows:
            record = json.loads(data)
            token = fernet.encrypt(base64.b64decode(record["ciphertext"]))
            record["ciphertext"] = base64.b64encode(token).decode("ascii")
            db.execute("UPDATE sensitive_values SET data = ? WHERE id = ?",
                       (json.dumps(record), record_id))
        db.execute("COMMIT")
        if not rows:
            break
        after = rows[-1][0]
    seconds = time.perf_counter() - started
    db.close()
    return seconds


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    firsts, seconds, raws = [], [], []
    for round_number in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as folder:
            fill(Path(folder) / "library.db", args.records)
            fill(Path(folder) / "raw.db", args.records)
            first, second = library(Path(folder) / "library.db", args.batch_size)
            raw = baseline(Path(folder) / "raw.db", args.batch_size)
        firsts.append(first)
        seconds.append(second)
        raws.append(raw)
        print(f"round {round_number}: rekey {args.records / first:7.0f} records/s   "
              f"second run {args.records / second:7.0f} records/s   "
              f"raw sqlite3 {args.records / raw:7.0f} records/s")
    rate = args.records / statistics.median(firsts)
    ratio = statistics.median(raws) / statistics.median(firsts)
    print(f"rekey: {rate:.0f} records/s (goal >= {GOAL_RATE:.0f}: "
          f"{'met' if rate >= GOAL_RATE else 'missed'})")
    print(f"rekey / raw sqlite3: {ratio:.2f} (goal >= {GOAL_RATIO}: "
          f"{'met' if ratio >= GOAL_RATIO else 'missed'})")
    print(f"second run (nothing left): {args.records / statistics.median(seconds):.0f} records/s")


if __name__ == "__main__":
    main()
