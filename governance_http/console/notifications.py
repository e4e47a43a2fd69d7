"""The console's notifications page: destinations, monitors and the delivery log.

Every read and action goes through the core's notification operations as the signed-in
caller; a new or rotated secret is shown on the one answer that made it.
"""

from __future__ import annotations

from typing import Any

from governance_core.errors import NotFound
from governance_core.notifications.monitors import COMPARISONS, METRICS
from governance_http.console.pages import Action, Page
from governance_http.console.web import Console, Visit

__all__ = ["notification_routes"]

PAGE_SIZE = 25
DELIVERY_STATUSES = ("pending", "delivered", "dead")


def _number(raw: str | None) -> float | str | None:
    """A form's number: None when blank, the text itself when not a number (the core names it)."""
    if raw is None or not raw.strip():
        return None
    try:
        return float(raw)
    except ValueError:
        return raw


def _names(visit: Visit, operation: str) -> dict[str, str]:
    page = visit.call(operation, sorting="name", **{"pagination[page_size]": 100})
    return {row["id"]: row["name"] for row in page["summaries"]}


def notifications_page(visit: Visit, secret: dict[str, Any] | None = None) -> None:
    """Destinations, monitors and the latest deliveries (``status`` filters them)."""
    status = visit.query("status")
    chosen = status if status in DELIVERY_STATUSES else None
    destinations = visit.call("destinations/list", sorting="name",
                              **{"pagination[page_size]": 100})["summaries"]
    visit.render(
        "notifications.html",
        destinations=destinations,
        destination_names={row["id"]: row["name"] for row in destinations},
        monitors=visit.call("monitors/list", sorting="name",
                            **{"pagination[page_size]": 100})["summaries"],
        deliveries=visit.call("deliveries/list", status=chosen, sorting="-inserted_at",
                              **{"pagination[page_size]": PAGE_SIZE})["summaries"],
        agents=_names(visit, "agents/list"), metrics=METRICS, comparisons=COMPARISONS,
        statuses=DELIVERY_STATUSES, chosen_status=chosen, secret=secret,
    )


def create_destination(visit: Visit) -> None:
    """Create a destination and show its secret on this one answer."""
    made = visit.call(
        "destinations/create", name=visit.form.get("name", ""), url=visit.form.get("url", ""),
        body_format=visit.form.get("body_format") or None,
    )
    notifications_page(visit, secret={"name": made["details"]["name"], "value": made["secret"]})


def destination_action(visit: Visit, destination_id: str, action: str) -> None:
    """Test, rotate (showing the new secret), enable, disable or delete a destination."""
    if action == "rotate_secret":
        made = visit.call("destinations/rotate_secret", destination_id=destination_id)
        notifications_page(
            visit, secret={"name": made["details"]["name"], "value": made["secret"]}
        )
        return
    if action in ("enable", "disable"):
        visit.call("destinations/update", destination_id=destination_id,
                   status="active" if action == "enable" else "disabled")
    elif action in ("test", "delete"):
        visit.call(f"destinations/{action}", destination_id=destination_id)
    else:
        raise NotFound("unknown destination action")
    visit.redirect("/notifications")


def create_monitor(visit: Visit) -> None:
    """Create a monitor from the form."""
    form = visit.form
    visit.call(
        "monitors/create", name=form.get("name", ""), metric=form.get("metric", ""),
        comparison=form.get("comparison") or None, agent_id=form.get("agent_id") or None,
        window_seconds=form.get("window_seconds") or None,
        warning=_number(form.get("warning")), critical=_number(form.get("critical")),
        hysteresis=_number(form.get("hysteresis")),
    )
    visit.redirect("/notifications")


def monitor_action(visit: Visit, monitor_id: str, action: str) -> None:
    """Evaluate now, pause, resume or delete a monitor."""
    if action == "evaluate":
        visit.call("monitors/evaluate", monitor_id=monitor_id)
    elif action in ("pause", "resume"):
        visit.call("monitors/update", monitor_id=monitor_id,
                   status="paused" if action == "pause" else "active")
    elif action == "delete":
        visit.call("monitors/delete", monitor_id=monitor_id)
    else:
        raise NotFound("unknown monitor action")
    visit.redirect("/notifications")


def resend_delivery(visit: Visit, delivery_id: str) -> None:
    """Send a delivered or dead delivery again."""
    visit.call("deliveries/resend", delivery_id=delivery_id)
    visit.redirect("/notifications")


def notification_routes(console: Console) -> list[tuple[str, object]]:
    """The notifications page's paths and their resources."""
    return [
        ("/notifications", Page(console, notifications_page)),
        ("/notifications/destinations", Action(console, create_destination)),
        ("/notifications/destinations/{destination_id}/{action}",
         Action(console, destination_action)),
        ("/notifications/monitors", Action(console, create_monitor)),
        ("/notifications/monitors/{monitor_id}/{action}", Action(console, monitor_action)),
        ("/notifications/deliveries/{delivery_id}/resend", Action(console, resend_delivery)),
    ]
