"""The sessions page: the account's conversations over a window, each with its runs' figures.

A run belongs to a session (a conversation) and to a user when its spans name them (see
:func:`~governance_core.domain.runs.keep_run_parties`). The page lists the sessions of the
runs started in the last 1, 7, 30 or 90 days, newest activity first, 25 a page: run count,
failed runs, the UTC days of the first and last start, total cost and users, each session and
user linked to the runs list filtered by it. Every figure comes from
:func:`~governance_core.domain.insights.run_sessions`, one grouped query of the store; this
module only lays them out.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from governance_core.domain.insights import run_sessions
from governance_http.console.pages import Page
from governance_http.console.web import Console, Visit, chosen_window, whole_number

__all__ = ["DEFAULT_WINDOW", "WINDOWS", "session_routes", "sessions_page"]

WINDOWS = {1: "24h", 7: "7d", 30: "30d", 90: "90d"}
"""The windows the page offers, in days before now, and the runs list's ``since`` for each."""
DEFAULT_WINDOW = 7
PAGE_SIZE = 25
USERS_SHOWN = 5
"""The most users a session's row names (it says how many more there are)."""


def sessions_page(visit: Visit) -> None:
    """``/sessions``: one page of the sessions of the runs started in the chosen window.

    ``window`` is 1, 7, 30 or 90 (days, default 7); ``offset`` pages. A window the page does
    not offer is answered 400 with a message naming it, and the default window shown.
    """
    window, error = chosen_window(visit.query("window"), WINDOWS, DEFAULT_WINDOW)
    since = visit.now - timedelta(days=window)
    sessions = run_sessions(visit.context(), since)
    total = len(sessions)
    offset = whole_number(visit.query("offset"), 10**9) or 0
    visit.render(
        "sessions.html", 400 if error else 200, error=error, window=window, windows=WINDOWS,
        since=since, runs_since=WINDOWS[window],
        sessions=sessions[offset:offset + PAGE_SIZE], total=total, offset=offset,
        page_size=PAGE_SIZE, users_shown=USERS_SHOWN, query=urlencode,
    )


def session_routes(console: Console) -> list[tuple[str, object]]:
    """The sessions page's path and its resource."""
    return [("/sessions", Page(console, sessions_page))]
