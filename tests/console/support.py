"""A cookie-keeping visitor of the console over falcon's test client."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import falcon.testing

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


class Visitor:
    """One browser: keeps the cookies the console sets and sends them back."""

    def __init__(self, client: falcon.testing.TestClient) -> None:
        self.client = client
        self.cookies: dict[str, str] = {}

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return headers

    def _keep(self, result: falcon.testing.Result) -> falcon.testing.Result:
        for name, cookie in result.cookies.items():
            if cookie.value:
                self.cookies[name] = cookie.value
            else:
                self.cookies.pop(name, None)
        return result

    def get(self, path: str, **params: Any) -> falcon.testing.Result:
        """GET a page with the visitor's cookies."""
        query = urlencode(params) if params else None
        return self._keep(self.client.simulate_get(path, query_string=query,
                                                   headers=self._headers()))

    def post(
        self,
        path: str,
        form: dict[str, str] | list[tuple[str, str]],
        headers: dict[str, str] | None = None,
    ) -> falcon.testing.Result:
        """POST a form with the visitor's cookies (no CSRF token unless in ``form``).

        A list of pairs sends a name more than once (the ticked boxes of a list).
        """
        return self._keep(self.client.simulate_post(
            path, body=urlencode(form), headers=self._headers({**FORM, **(headers or {})})
        ))

    def csrf(self, path: str = "/settings") -> str:
        """The CSRF token found in a page's forms."""
        found = CSRF.search(self.get(path).text)
        assert found is not None, "no form with a CSRF token"
        return found.group(1)

    def act(self, path: str, form: dict[str, str]) -> falcon.testing.Result:
        """POST a form as a page would: with the session's CSRF token."""
        return self.post(path, {**form, "csrf_token": self.csrf()})

    def sign_in(self, token: str) -> falcon.testing.Result:
        """Open the sign-in page and post the token with its CSRF token."""
        csrf = CSRF.search(self.get("/sign-in").text)
        assert csrf is not None
        return self.post("/sign-in", {"token": token, "csrf_token": csrf.group(1), "next": "/"})
