"""Body limits and request syntax: size, nesting depth, media type, JSON, routing, methods."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import falcon
import falcon.testing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.service import Bootstrap, Governance
from governance_http import create_app
from governance_http.body import MAX_BODY_BYTES, nesting_exceeds
from tests.http.support import Api, assert_error


class CountingStream(io.RawIOBase):
    """An endless request body that counts how much of it the app read."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = min(len(buffer), 64 * 1024)
        buffer[:size] = b" " * size
        self.read_bytes += size
        return size


def call_wsgi(app: falcon.App[Any, Any], environ: dict[str, Any]) -> tuple[str, Any]:
    start = falcon.testing.StartResponseMock()
    chunks = app(environ, start)
    return start.status, json.loads(b"".join(chunks))


def raw_environ(boot: Bootstrap, stream: io.RawIOBase, **headers: str) -> dict[str, Any]:
    environ = falcon.testing.create_environ(
        path="/api/v1/team", method="POST",
        headers={"Authorization": f"Bearer {boot.token}", "Content-Type": "application/json",
                 **headers},
    )
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input"] = io.BufferedReader(stream)
    return environ


def test_a_declared_length_over_the_limit_is_refused_unread(
    gov: Governance, boot: Bootstrap
) -> None:
    stream = CountingStream()
    environ = raw_environ(boot, stream)
    environ["CONTENT_LENGTH"] = str(MAX_BODY_BYTES + 1)
    status, body = call_wsgi(create_app(gov), environ)
    assert status.startswith("413")
    assert body["status"] == "error" and body["code"] == "bad_request"
    assert stream.read_bytes == 0


def test_a_chunked_body_is_read_no_further_than_the_limit(
    gov: Governance, boot: Bootstrap
) -> None:
    stream = CountingStream()
    environ = raw_environ(boot, stream, **{"Transfer-Encoding": "chunked"})
    status, body = call_wsgi(create_app(gov, max_body_bytes=1000), environ)
    assert status.startswith("413")
    assert body["code"] == "bad_request"
    assert stream.read_bytes <= 1000 + 64 * 1024


def test_a_chunked_body_within_the_limit_is_read(gov: Governance, boot: Bootstrap) -> None:
    body = io.BytesIO(b'{"name": "Chunked"}')
    environ = raw_environ(boot, body, **{"Transfer-Encoding": "chunked"})
    status, body = call_wsgi(create_app(gov), environ)
    assert status.startswith("200"), body
    assert body["details"]["name"] == "Chunked"


def test_the_limit_is_configurable_and_exact(gov: Governance, boot: Bootstrap) -> None:
    api = Api(falcon.testing.TestClient(create_app(gov, max_body_bytes=40)), boot.token)
    fits = json.dumps({"name": "x" * 20}).ljust(40)
    assert api.post("/team", body=fits).status_code == 200
    assert_error(api.post("/team", body=fits + " "), 413, "bad_request")


@pytest.mark.parametrize("depth", [64, 65, 100_000])
def test_nesting_beyond_64_levels_is_a_bad_request_never_a_crash(api: Api, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    result = api.post("/team", body=json.dumps({"name": "deep", "extra": "PLACEHOLDER"}).replace(
        '"PLACEHOLDER"', nested))
    if depth + 1 <= 64:
        assert result.status_code == 200
    else:
        body = assert_error(result, 400, "bad_request")
        assert "64 levels" in body["message"]


def test_a_body_of_exactly_64_levels_is_accepted(api: Api) -> None:
    nested = "[" * 63 + "]" * 63
    result = api.post("/team", body='{"name": "deep", "extra": ' + nested + "}")
    assert result.status_code == 200, result.text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{}é'),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(alphabet="[]{}\"k"), inner, max_size=3),
    max_leaves=20,
)


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(min_value=0, max_value=6), st.booleans())
def test_nesting_measure_agrees_with_the_decoded_depth(
    value: Any, limit: int, as_ascii: bool
) -> None:
    raw = json.dumps(value, ensure_ascii=as_ascii).encode()
    assert nesting_exceeds(raw, limit) == (depth_of(value) > limit)


@pytest.mark.parametrize(
    "shape",
    ["[" * 5_000_000 + "]" * 5_000_000, "[" + "[]," * 3_000_000 + "[]]",
     "[" + '"x",' * 2_000_000 + "1]", ("[" * 60 + "]" * 60) * 80_000],
)
def test_measuring_a_hostile_body_is_fast(shape: str) -> None:
    started = time.perf_counter()
    nesting_exceeds(shape.encode(), 64)
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize(
    "body",
    ['{"name": ', "{'name': 'x'}", '{"name": NaN}', '{"name": Infinity}', "\ufeff{}", "[1,]",
     '{"a": 1}{"b": 2}', "1" * 5000],
)
def test_malformed_json_is_a_bad_request(api: Api, body: str) -> None:
    assert_error(api.post("/team", body=body), 400, "bad_request")


def test_invalid_utf8_is_a_bad_request(api: Api) -> None:
    assert_error(api.post("/team", body=b'{"name": "\xff"}'), 400, "bad_request")


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"]
)
def test_a_body_of_another_media_type_is_a_bad_request(api: Api, content_type: str) -> None:
    result = api.post("/team", body='{"name": "x"}', headers={"Content-Type": content_type})
    assert_error(result, 400, "bad_request")


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "application/vnd.api+json"],
)
def test_json_media_types_are_accepted(api: Api, content_type: str) -> None:
    result = api.post("/team", body='{"name": "x"}', headers={"Content-Type": content_type})
    assert result.status_code == 200, result.text


def test_a_body_without_a_media_type_is_read_as_json(api: Api) -> None:
    result = api.client.simulate_post(
        "/api/v1/team", body='{"name": "x"}', headers={"Authorization": f"Bearer {api.token}"}
    )
    assert result.status_code == 200, result.text


def test_an_empty_body_or_null_is_no_body(api: Api) -> None:
    for body in ("", "  \n", "null"):
        assert_error(api.post("/team", body=body), 422, "validation_errors")


def test_an_unknown_route_is_not_found(api: Api) -> None:
    for path in ("/api/v1/nowhere", "/api/v2/team", "/", "/api/v1/team/x/y/z"):
        body = assert_error(api.get(path), 404, "not_found")
        assert path in body["message"]


def test_a_wrong_method_is_405_bad_request_with_allow(api: Api) -> None:
    result = api.delete("/team")
    assert_error(result, 405, "bad_request")
    assert set(result.headers["allow"].replace(" ", "").split(",")) >= {"GET", "POST"}
    assert_error(api.request("PATCH", "/ping"), 405, "bad_request")


def test_a_trailing_slash_is_tolerated(api: Api) -> None:
    assert api.get("/team/").status_code == 200
    assert api.post("/team/", json={"name": "Slash"}).status_code == 200


def test_an_invalid_content_length_is_a_bad_request(gov: Governance, boot: Bootstrap) -> None:
    environ = raw_environ(boot, io.BytesIO(b'{"name": "x"}'))
    environ["CONTENT_LENGTH"] = "many"
    status, body = call_wsgi(create_app(gov), environ)
    assert status.startswith("400")
    assert body["code"] == "bad_request"
