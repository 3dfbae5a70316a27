"""Where the database is: the default URL and the read replicas' URLs from the environment.

Kept apart from :mod:`rpquery.db` (which needs SQLAlchemy) so that ``rpquery --help``
can show the default without loading SQLAlchemy; ``rpquery.db`` re-exports these names.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_URL", "REPLICA_URLS_ENV", "split_urls"]

DEFAULT_URL = "sqlite:///rpquery.db"

#: Read replicas' URLs, separated by commas or spaces (the CLI's ``--replica``).
REPLICA_URLS_ENV = "RPQUERY_DB_REPLICA_URLS"


def split_urls(text: str | None) -> list[str]:
    """URLs from a comma- or space-separated list (``RPQUERY_DB_REPLICA_URLS``).

    >>> split_urls("postgresql://a/x, postgresql://b/x")
    ['postgresql://a/x', 'postgresql://b/x']
    """
    return [part for part in re.split(r"[,\s]+", text or "") if part]
