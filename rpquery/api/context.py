"""What a handler knows about its request: ``req.context`` is a :class:`RequestContext`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rpquery.api.auth import Authorizer, Identity, allow_all
from rpquery.api.microversion import MIN_VERSION, Version
from rpquery.db import Database

if TYPE_CHECKING:
    from rpquery.read.candidates import CandidateOptions

__all__ = ["RequestContext"]


class RequestContext:
    """Set by the app before a handler runs.

    ``version`` is the negotiated microversion, ``identity`` the caller (``None`` on
    the unauthenticated root), ``db`` the :class:`rpquery.db.Database`,
    ``request_id`` the ``x-openstack-request-id`` echoed on the response,
    ``global_request_id`` the caller's valid inbound one (``-`` when none),
    ``candidate_options`` Placement's ``[placement]`` candidate options the app
    serves ``GET /allocation_candidates`` with (``None``: their defaults).
    """

    version: Version = MIN_VERSION
    version_set: bool = False
    identity: Identity | None = None
    db: Database
    request_id: str = ""
    global_request_id: str = "-"
    authorizer: Authorizer = allow_all
    error_code: str | None = None
    candidate_options: CandidateOptions | None = None

    def authorize(self, rule: str, target: Mapping[str, object] | None = None) -> None:
        """Ask the app's authorizer about ``rule``; raises a 403 ``ApiError`` to refuse.
        Handlers call this themselves only when the target depends on the request
        (e.g. ``GET /usages?project_id=``); otherwise the route's rule is checked."""
        if self.identity is None:
            return
        default = {"project_id": self.identity.project_id, "user_id": self.identity.user_id}
        self.authorizer(self.identity, rule, target if target is not None else default)
