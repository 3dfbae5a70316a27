"""keystonemiddleware's ``auth_token`` in front of the app (``[api] auth_strategy =
keystone``), as Placement 16.0 runs it.

auth_token validates the ``X-Auth-Token`` of every request against Keystone (with the
service user of ``[keystone_authtoken]``), removes every identity header the caller
sent, and sets them from the token (``X-User-Id``, ``X-Project-Id``, ``X-Roles``,
``OpenStack-System-Scope``, ``X-Service-Roles``, ``X-Identity-Status`` ...). A missing,
malformed, expired or revoked token is answered by auth_token itself: 401 with its JSON
body and ``WWW-Authenticate: Keystone uri="..."``, exactly what Placement answers. The
root ``/`` (the version document) stays public, as Placement keeps it, and so does
rpquery's ``/healthcheck``.

Needs keystonemiddleware (``pip install 'rpquery[openstack]'``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from keystonemiddleware import auth_token

from rpquery.api.auth import KEYSTONE_MARK

__all__ = ["protect"]

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
#: Paths auth_token does not guard.
PUBLIC = frozenset({"", "/", "/healthcheck"})


class _Marked:
    """The app behind auth_token: marks each request that went through it, so the app
    trusts the identity headers of those requests only."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        environ[KEYSTONE_MARK] = True
        return self.app(environ, start_response)


class _PublicRootAuthProtocol(auth_token.AuthProtocol):
    """auth_token, but not for :data:`PUBLIC` paths."""

    def __init__(self, app: WsgiApp, conf: dict[str, Any]) -> None:
        self._public_app = app
        super().__init__(_Marked(app), conf)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO", "") in PUBLIC:
            environ.pop(KEYSTONE_MARK, None)
            return self._public_app(environ, start_response)
        return super().__call__(environ, start_response)


def protect(app: WsgiApp, conf: Any) -> WsgiApp:
    """``app`` behind auth_token configured by ``conf`` (an oslo.config ``ConfigOpts``
    whose ``[keystone_authtoken]`` group auth_token reads, as Placement passes it)."""
    return _PublicRootAuthProtocol(app, {"oslo_config_config": conf})
