"""Sessions: lint, typing, the core's suite without falcon (and on PostgreSQL), the rest.

``python -m nox`` runs them all (what CI runs); ``python -m nox -s tests`` runs one. Each test
runs once, but the plugin's, which check other things with falcon than without it:
``tests_core`` runs the core's, the storage and the plugin's tests (without falcon, which
shows the core needs none), then, given ``GOVERNANCE_TEST_POSTGRES_URL``, the core's suite
with PostgreSQL as its store; ``tests`` runs every other test and the plugin's again.
``python -m nox -s tests_postgres`` runs the PostgreSQL part alone. Plain ``pytest`` (no nox)
runs every test but the PostgreSQL part.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "typing", "tests_core", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
CORE_EXTRAS = ".[test,encryption,postgres]"
CORE_TESTS = ("tests/core", "tests/storage")
"""The tests ``tests_core`` runs without falcon (then those of them that follow
``$GOVERNANCE_TEST_STORE`` on PostgreSQL) and ``tests`` leaves out."""


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Every test but the core's and the storage tests (``tests_core``), with every extra."""
    session.install("-e", ".[http,test,encryption,otel,postgres]")
    session.run(
        "pytest", "-n", "2", *(f"--ignore={path}" for path in CORE_TESTS), *session.posargs
    )


@nox.session(python=PYTHON)
def tests_core(session: nox.Session) -> None:
    """The core's and the storage adapters' tests without falcon, then on PostgreSQL.

    The PostgreSQL part (:func:`tests_postgres`) runs in the same environment when
    ``GOVERNANCE_TEST_POSTGRES_URL`` is set; without it the session says so, and fails
    instead when ``GOVERNANCE_TEST_REQUIRE=1``.
    """
    session.install("-e", CORE_EXTRAS)
    session.run(
        "python", "-c",
        "import importlib.util, sys; sys.exit(importlib.util.find_spec('falcon') is not None)",
    )
    # The plugin's tests run in both: with and without falcon, they check different things.
    session.run("pytest", "-n", "2", *CORE_TESTS, "tests/plugin", *session.posargs)
    store = f"{session.create_tmp()}/governance.db"
    session.run("governance", "--help", silent=True)
    session.run("governance", "demo", "--create", "--db", store, "--json", silent=True)
    session.run("governance", "runs", "list", "--db", store, "--json", silent=True)
    if os.environ.get("GOVERNANCE_TEST_POSTGRES_URL"):
        _postgres_suite(session)
    elif os.environ.get("GOVERNANCE_TEST_REQUIRE") == "1":
        session.error("the PostgreSQL suite needs GOVERNANCE_TEST_POSTGRES_URL"
                      " (required: GOVERNANCE_TEST_REQUIRE=1)")
    else:
        session.warn("the core's suite on PostgreSQL skipped: it needs"
                     " GOVERNANCE_TEST_POSTGRES_URL, e.g."
                     " postgresql://postgres@127.0.0.1:5432/postgres")


@nox.session(python=PYTHON)
def tests_postgres(session: nox.Session) -> None:
    """The core's tests with every store fixture on PostgreSQL, alone.

    ``tests_core`` runs the same after its own tests (one environment for both).
    """
    session.install("-e", CORE_EXTRAS)
    _postgres_suite(session)


def _postgres_suite(session: nox.Session) -> None:
    """The core's suite with PostgreSQL as its store.

    Each test process works in a database of its own on $GOVERNANCE_TEST_POSTGRES_URL's
    server, created and dropped by the run.
    """
    session.run(
        "pytest", "-n", "2", "tests/core",
        # The storage tests whose stores follow $GOVERNANCE_TEST_STORE. The others make their
        # stores themselves (PostgreSQL's among them, given the URL): tests_core runs them.
        *(f"tests/storage/test_{name}.py"
          for name in ("day_costs", "run_parties", "tool_call_numbers")),
        # The notifications' and policies' store-level tests.
        *(f"tests/notifications/test_{name}.py"
          for name in ("outbox", "delivery", "monitors", "secrets", "addresses")),
        *(f"tests/policies/test_{name}.py"
          for name in ("engine", "decisions", "approvals", "worked_policies", "guard",
                       "processes", "settings_mark")),
        *session.posargs,
        env={"GOVERNANCE_TEST_STORE": "postgres"},
    )


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """schemathesis over every documented operation with every check, many cases each.

    Prints the operations and the cases run per operation (in one process, so they are counted).
    """
    session.install("-e", ".[http,test,encryption]")
    examples = session.posargs[0] if session.posargs else "200"
    session.run(
        "pytest", "-p", "no:xdist", "-q", "tests/http/test_schemathesis.py",
        env={"GOVERNANCE_FUZZ_EXAMPLES": examples},
    )


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff over code, tests, examples and scripts."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def typing(session: nox.Session) -> None:
    """mypy --strict over both packages."""
    session.install(
        "-e", ".[http,test,encryption,otel,postgres]", "mypy>=1.10", "types-jsonschema"
    )
    session.run("mypy", "--strict", "governance_core", "governance_http")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """The benchmarks: each prints its figures and a ratio against a baseline run beside it."""
    session.install("-e", ".[http,test,otel,postgres]", "gunicorn", "waitress", "cheroot")
    for script in (
        "benchmarks/storage_bench.py",
        "benchmarks/ingest_bench.py",
        "benchmarks/serve_bench.py",
        "benchmarks/otlp_bench.py",
        "benchmarks/console_bench.py",
        "benchmarks/postgres_bench.py",
        "benchmarks/id_bench.py",
        "benchmarks/schema_work_bench.py",
        "benchmarks/writer_hold_bench.py",
        "benchmarks/run_read_bench.py",
        "benchmarks/run_find_bench.py",
        "benchmarks/disk_bench.py",
        "benchmarks/decision_bench.py",
        "benchmarks/busy_account_bench.py",
        "benchmarks/backtest_bench.py",
        "benchmarks/mlflow_bench.py",
        "benchmarks/slow_body_bench.py",
        "benchmarks/otlp_concurrency_bench.py",
        "benchmarks/otlp_overload_bench.py",
        "benchmarks/otlp_store_bench.py",
        "benchmarks/delivery_bench.py",
        "benchmarks/rekey_bench.py",
    ):
        session.run("python", script)
    session.run("python", "benchmarks/serve_bench.py", "--goals", "--rounds", "3")
    session.run("python", "benchmarks/sqlite_writers_bench.py", "--requests", "3000",
                "--rounds", "2")
