"""A plain WSGI test client for the API: calls the app with a PEP 3333 environ and
collects the response. (Falcon's TestClient runs ``wsgiref.validate``, which wants a
``Content-Type`` on every 201; Placement sends none on bodiless answers, and so do we.)"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import falcon.testing


@dataclass
class Result:
    status_code: int
    headers: dict[str, str] = field(default_factory=dict)
    text: str = ""

    @property
    def json(self) -> Any:
        return json.loads(self.text)


class WsgiClient:
    def __init__(self, app: Any) -> None:
        self.app = app

    def simulate_request(
        self,
        method: str,
        path: str,
        *,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Result:
        environ = falcon.testing.create_environ(
            path=path.split("?")[0],
            query_string=path.split("?", 1)[1] if "?" in path else "",
            method=method,
            headers=headers or {},
            body=body or "",
        )
        if body is None:
            environ.pop("CONTENT_LENGTH", None)
        if "CONTENT_TYPE" in environ and not environ["CONTENT_TYPE"]:
            environ.pop("CONTENT_TYPE")
        seen: dict[str, Any] = {}

        def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
            seen["status"] = int(status.split()[0])
            seen["headers"] = {}
            for name, value in response_headers:
                key = name.lower()
                seen["headers"][key] = (
                    f"{seen['headers'][key]}, {value}" if key in seen["headers"] else value
                )

        raw = b"".join(self.app(environ, start_response))
        return Result(seen["status"], seen["headers"], raw.decode())

    def simulate_get(self, path: str, **kw: Any) -> Result:
        return self.simulate_request("GET", path, **kw)

    def simulate_post(self, path: str, **kw: Any) -> Result:
        return self.simulate_request("POST", path, **kw)

    def simulate_options(self, path: str, **kw: Any) -> Result:
        return self.simulate_request("OPTIONS", path, **kw)
