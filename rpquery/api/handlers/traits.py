"""Handlers of Placement's traits routes."""

from __future__ import annotations

from rpquery.api.routing import Route

ROUTES: list[Route] = []
