from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance_core import jsontext

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
).filter(lambda value: _utf8(json.dumps(value)))


def _utf8(text: str) -> bool:
    try:
        json.loads(text) and str(json.loads(text)).encode()
    except UnicodeEncodeError:
        return False
    return True


@given(JSON)
def test_json_values_read_back_as_written(value: Any) -> None:
    text = jsontext.dumps(value)
    assert jsontext.loads(text) == value == json.loads(text)
    # Compact: no white space but inside strings.
    assert len(text) == len(jsontext.dumps(json.loads(text)))


@pytest.mark.parametrize("value", [
    float("nan"), [float("inf")], {"x": -float("inf")}, {1: 2}, {None: 1}, "\ud800",
    {"a": object()}, {"a": {1, 2}}, b"bytes",
])
def test_what_json_cannot_hold_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="not a JSON value"):
        jsontext.dumps(value)


def test_text_the_standard_library_wrote_still_reads() -> None:
    assert jsontext.loads('{"a": "\\ud800", "b": 1180591620717411303424}') == {
        "a": "\ud800", "b": 2**70,
    }
    expected = '{"big":1180591620717411303424,"é":"\u2028"}'
    assert jsontext.dumps({"big": 2**70, "é": "\u2028"}) == expected
