"""Handlers of Placement's resource_providers routes."""

from __future__ import annotations

from rpquery.api.routing import Route

ROUTES: list[Route] = []
