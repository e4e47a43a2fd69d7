"""How the ``governance`` command prints: tables and trees for people, JSON for scripts.

People's output is drawn by ``rich`` (the ``cli`` extra), which is imported only when such
output is asked for, so ``--json`` works without it. Progress is shown on standard error when
that is a terminal, and not at all when it is piped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

__all__ = [
    "DISTRIBUTION",
    "WIDTH_WHEN_PIPED",
    "CommandError",
    "Tick",
    "console",
    "print_json",
    "print_renderable",
    "print_table",
    "progress",
]

DISTRIBUTION = "agent-runs-governance"
"""The name this project is published and installed under."""

WIDTH_WHEN_PIPED = 160
"""Columns rich lays out for when standard output is not a terminal (it would assume 80)."""


class CommandError(Exception):
    """A refusal the command reports as ``error: <message>`` with exit status 1."""


def _rich_missing() -> CommandError:
    return CommandError(
        f"this output needs rich: install {DISTRIBUTION}[cli] (from a checkout: pip install "
        "'.[cli]'), or add --json"
    )


def console() -> Console:
    """A rich console over the current standard output."""
    try:
        from rich.console import Console
    except ImportError as error:
        raise _rich_missing() from error
    width = None if sys.stdout.isatty() else WIDTH_WHEN_PIPED
    return Console(file=sys.stdout, width=width, highlight=False)


def print_json(value: Any) -> None:
    """Print ``value`` as one JSON document."""
    print(json.dumps(value, indent=2, default=str))


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    right: Sequence[str] = (),
    title: str | None = None,
    empty: str = "nothing to show",
) -> None:
    """Print an aligned table; ``right`` names the columns aligned right (numbers)."""
    out = console()
    if not rows:
        out.print(empty)
        return
    from rich import box
    from rich.table import Table

    table = Table(
        box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False
    )
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left")
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    out.print(table)


def print_renderable(renderable: RenderableType) -> None:
    """Print anything rich can draw (a tree, a panel)."""
    console().print(renderable)


class Tick(Protocol):
    """Advances a progress display by ``steps``."""

    def __call__(self, steps: int = 1) -> None:
        """Advance."""


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Tick]:
    """A progress bar on standard error when it is a terminal; a no-op otherwise."""
    if not sys.stderr.isatty():
        yield lambda steps=1: None
        return
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:
        yield lambda steps=1: None
        return
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda steps=1: bar.advance(task, steps)
