"""Without the Cedar engine (the ``policies`` extra): the core serves, policies answer 501."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from governance_core.errors import NotImplementedOperation
from governance_core.policies import engine
from tests.policies.support import RunWorld


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "cedarpy", None)


@pytest.mark.usefixtures("no_engine")
@pytest.mark.parametrize(("operation", "members"), [
    ("policies/create", {"name": "x", "source": "forbid (principal, action, resource);"}),
    ("policies/validate", {"source": "forbid (principal, action, resource);"}),
    ("policies/list", {}),
])
def test_policy_operations_name_the_extra(
    world: RunWorld, operation: str, members: dict[str, str]
) -> None:
    with pytest.raises(NotImplementedOperation, match="'policies' extra"):
        world.session.call(operation, members)


def test_decide_allows_when_the_account_has_no_policy(
    world: RunWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = world.run()
    monkeypatch.setattr(engine, "cedarpy", None)
    assert world.decide(run, "tool_call", "search")["outcome"] == "allow"


def test_decide_refuses_when_the_account_has_live_policies(
    world: RunWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = world.run()
    world.policy('forbid (principal, action, resource == Tool::"email");')
    monkeypatch.setattr(engine, "cedarpy", None)
    with pytest.raises(NotImplementedOperation, match="'policies' extra"):
        world.decide(run, "tool_call", "search")


def test_the_server_imports_and_serves_without_cedarpy() -> None:
    script = textwrap.dedent("""
        import sys
        sys.modules["cedarpy"] = None  # as if it were not installed
        import falcon.testing
        from governance_core.service import Governance
        from governance_http import create_app

        gov = Governance.open(":memory:")
        token = gov.bootstrap().token
        client = falcon.testing.TestClient(create_app(gov))
        headers = {"Authorization": f"Bearer {token}"}
        assert client.simulate_get("/api/v1/ping", headers=headers).status_code == 200
        answer = client.simulate_get("/api/v1/policy", headers=headers)
        assert answer.status_code == 501, answer.text
        assert answer.json["code"] == "not_implemented"
        print("served")
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "served"
