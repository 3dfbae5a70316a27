"""Handlers of Placement's allocation_candidates routes (owned by the gabbi helper;
see docs/api.md, "Adding a handler")."""

from __future__ import annotations

from rpquery.api.routing import Route

ROUTES: list[Route] = []
