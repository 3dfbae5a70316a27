"""One module per area of Placement's API; each exports ``ROUTES`` (a list of
:class:`rpquery.api.routing.Route`) collected by :mod:`rpquery.api.routes`."""

__all__ = []
