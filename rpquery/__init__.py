"""rpquery: Placement-compatible placement queries on SQLAlchemy Core."""

import logging

from rpquery.db import Database
from rpquery.errors import (
    CapacityExceeded,
    ConcurrentUpdate,
    Conflict,
    DatabaseError,
    InUse,
    InvalidRequest,
    NotFound,
    RpqueryError,
    SchemaError,
)

__all__ = [
    "CapacityExceeded",
    "ConcurrentUpdate",
    "Conflict",
    "Database",
    "DatabaseError",
    "InUse",
    "InvalidRequest",
    "NotFound",
    "RpqueryError",
    "SchemaError",
]
__version__ = "0.1.0"

# Library logging (retries and give-ups, rpquery.retry) is silent unless the
# application configures the ``rpquery`` logger or the root logger.
logging.getLogger("rpquery").addHandler(logging.NullHandler())
