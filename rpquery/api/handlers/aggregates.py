"""Handlers of Placement's aggregates routes."""

from __future__ import annotations

from rpquery.api.routing import Route

ROUTES: list[Route] = []
