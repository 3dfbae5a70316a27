"""Handlers of Placement's inventories routes."""

from __future__ import annotations

from rpquery.api.routing import Route

ROUTES: list[Route] = []
