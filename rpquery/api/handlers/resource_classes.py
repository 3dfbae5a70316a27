"""Handlers of Placement's resource_classes routes."""

from __future__ import annotations

from rpquery.api.routing import Route

ROUTES: list[Route] = []
