"""Liquid loops pay for the items their ``offset`` and ``reversed`` pass over."""

from __future__ import annotations

import pytest

from governance_core.rules.templates import OPERATION_BUDGET, render_template


@pytest.mark.parametrize(
    "template",
    [
        # python-liquid walks a range up to the offset before it applies its loop limit.
        "{% for a in (1..100000000) offset: 99999990 %}{{ a }}{% endfor %}",
        # ... and copies it, to reverse it.
        "{% for a in (1..100000000) reversed %}{% break %}{% endfor %}",
        "{% for a in (1..100000000) reversed offset: 99999990 %}{{ a }}{% endfor %}",
    ],
)
def test_a_loop_that_would_walk_far_past_its_budget_gives_no_summary(template: str) -> None:
    assert render_template(template, {}) is None


def test_offsets_and_reversed_loops_within_the_budget_still_render() -> None:
    assert render_template("{% for a in (1..100) offset: 95 %}{{ a }} {% endfor %}", {}) == (
        "96 97 98 99 100 "
    )
    assert render_template("{% for x in xs reversed limit: 3 %}{{ x }}{% endfor %}",
                           {"xs": list(range(50_000))}) == "210"
    # The charge is for the items passed over: an offset worth more than the whole budget
    # fails, one well within it does not.
    walked = OPERATION_BUDGET * 16 + 1000
    assert render_template(f"{{% for a in (1..{walked}) offset: {walked - 1} %}}{{{{ a }}}}"
                           "{% endfor %}", {}) is None
    assert render_template("{% for a in (1..20000) offset: 19999 %}{{ a }}{% endfor %}",
                           {}) == "20000"
