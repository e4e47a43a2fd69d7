"""Golden outputs: the playground's and the tests' templates rendered with their payloads.

``template_goldens.json`` holds named contexts and cases (``source``, ``template``, the name
of its ``context``, the ``expected`` summary or null for none). The cases come from the
playground's schemas, the templates the other tests render, and a few templates that show
where Liquid's semantics matter. A change of renderer that changes any output shows up as
a change of this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from governance_core.operations.playground import SCHEMA_VERSION
from governance_core.rules.templates import render_template

GOLDENS: dict[str, Any] = json.loads(
    (Path(__file__).parent / "template_goldens.json").read_text(encoding="utf-8")
)
CASES: list[dict[str, Any]] = GOLDENS["cases"]


@pytest.mark.parametrize("case", CASES, ids=[f"{i}:{c['source']}" for i, c in enumerate(CASES)])
def test_golden_output(case: dict[str, Any]) -> None:
    assert render_template(case["template"], GOLDENS["contexts"][case["context"]]) == (
        case["expected"]
    )


def test_every_playground_template_is_pinned() -> None:
    pinned = {case["template"] for case in CASES if case["source"].endswith("test_playground.py")}
    declared = {
        entry["template"]
        for group in ("span_type_schemas", "alert_schemas", "quality_schemas")
        for entry in SCHEMA_VERSION[group]
        if entry.get("template") is not None
    }
    assert declared <= pinned
