"""rpquery: Placement-compatible placement queries on SQLAlchemy Core."""

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
