"""Every error code answers its status (decisions, section 3) with the JSON envelope."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import falcon.testing
import pytest

from governance_core.errors import (
    GovernanceError,
    InvalidValue,
    TemporarilyUnavailable,
    ValidationErrors,
    error_class_for_code,
)
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from governance_http.errors import STATUS_BY_CODE
from governance_http.schemas import ERROR_CODES
from tests.http.support import Api, assert_error

DECIDED = {
    422: {"validation_errors", "invalid_value", "required_value", "unexpected_ref_type"},
    400: {"bad_request"},
    401: {"bad_authtoken", "not_authenticated"},
    403: {"not_permitted"},
    404: {"not_found", "alert_unknown"},
    409: {"invalid_action", "conflict", "alert_already_cleared", "idempotency_key_already_used"},
    503: {"temporarily_unavailable"},
    501: {"not_implemented"},
    500: {"unexpected", "unknown"},
}


class Failing(Governance):
    """A facade whose every operation raises the error it is given."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(MemoryStore())
        self.error = error

    def call(self, operation: str, params: Mapping[str, Any] | None = None, **_: Any) -> Any:
        raise self.error


def answer(error: BaseException) -> falcon.testing.Result:
    return Api(falcon.testing.TestClient(create_app(Failing(error))), "pf_x").get("/team")


def make(code: str) -> GovernanceError:
    cls = error_class_for_code(code)
    if cls is ValidationErrors:
        return ValidationErrors({"name": InvalidValue("bad")})
    return cls("it failed")


def test_the_table_is_the_decided_one_and_covers_every_code() -> None:
    assert {code: status for status, codes in DECIDED.items() for code in codes} == STATUS_BY_CODE
    assert set(STATUS_BY_CODE) == set(ERROR_CODES)


@pytest.mark.parametrize("code", sorted(STATUS_BY_CODE))
def test_each_code_answers_its_status_and_envelope(code: str) -> None:
    body = assert_error(answer(make(code)), STATUS_BY_CODE[code], code)
    expected = "invalid fields: name" if code == "validation_errors" else "it failed"
    assert body["message"] == expected


def test_validation_errors_nest_the_interface_way() -> None:
    nested = ValidationErrors({"items": ValidationErrors({"0": InvalidValue("no")})})
    body = assert_error(answer(nested), 422, "validation_errors")
    assert body["errors"]["items"]["errors"]["0"] == {
        "status": "error", "code": "invalid_value", "message": "no"
    }


def test_temporarily_unavailable_is_503_with_retry_after() -> None:
    result = answer(TemporarilyUnavailable("busy", retry_after_ms=1500))
    body = assert_error(result, 503, "temporarily_unavailable")
    assert body["retry_after_ms"] == 1500
    assert result.headers["retry-after"] == "2"


def test_a_rate_limit_is_429() -> None:
    result = answer(TemporarilyUnavailable(retry_after_ms=10, rate_limited=True))
    assert_error(result, 429, "temporarily_unavailable")
    assert result.headers["retry-after"] == "1"


def test_an_unexpected_exception_is_500_without_traceback(caplog: pytest.LogCaptureFixture) -> None:
    result = answer(ZeroDivisionError("secret detail"))
    body = assert_error(result, 500, "unexpected")
    assert "secret detail" not in result.text and "Traceback" not in result.text
    assert body["message"] == "an unexpected error occurred"
    assert "ZeroDivisionError" in caplog.text


class Unserializable(Governance):
    """A facade whose answer cannot be written as JSON (a bug in an operation)."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())

    def call(self, operation: str, params: Mapping[str, Any] | None = None, **_: Any) -> Any:
        return {"status": "success", "details": object()}


def test_an_answer_that_cannot_be_written_is_500_unexpected() -> None:
    api = Api(falcon.testing.TestClient(create_app(Unserializable())), "pf_x")
    assert_error(api.get("/team"), 500, "unexpected")
