"""Resource classes and traits: the standard ones from ``os-resource-classes`` and
``os-traits``, custom ones named ``CUSTOM_[A-Z0-9_]+``, and name ↔ id lookups.

Standard resource classes get id = their index in ``os_resource_classes.STANDARDS``
(Placement's rule, so ids agree with a Placement database); custom ones get ids from
10000 on.

>>> is_valid_custom_name("CUSTOM_GOLD")
True
>>> is_valid_custom_name("CUSTOM_gold")
False
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import os_resource_classes as orc
import os_traits
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery import dialects
from rpquery.errors import InvalidRequest
from rpquery.tables import resource_classes, traits

CUSTOM_NAME_RE = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
STANDARD_RESOURCE_CLASSES: tuple[str, ...] = tuple(orc.STANDARDS)
STANDARD_TRAITS: frozenset[str] = frozenset(os_traits.get_traits())


def is_valid_custom_name(name: str) -> bool:
    return bool(CUSTOM_NAME_RE.match(name))


def is_known_standard_trait(name: str) -> bool:
    return name in STANDARD_TRAITS


def is_known_standard_resource_class(name: str) -> bool:
    return name in STANDARD_RESOURCE_CLASSES


def check_trait_name(name: str) -> str:
    """Return ``name`` if it is a standard trait or a well-formed custom one, else raise
    ``InvalidRequest`` (``rpquery.trait.bad_name``). Needs no database."""
    if name in STANDARD_TRAITS or is_valid_custom_name(name):
        return name
    raise InvalidRequest(
        "rpquery.trait.bad_name",
        f"invalid trait name {name!r}: not a standard trait and not CUSTOM_[A-Z0-9_]+",
        token=name,
    )


def check_resource_class_name(name: str) -> str:
    """Return ``name`` if it is a standard class or a well-formed custom one, else raise
    ``InvalidRequest`` (``rpquery.resource_class.bad_name``). Needs no database."""
    if name in STANDARD_RESOURCE_CLASSES or is_valid_custom_name(name):
        return name
    raise InvalidRequest(
        "rpquery.resource_class.bad_name",
        f"invalid resource class {name!r}: not a standard class and not CUSTOM_[A-Z0-9_]+",
        token=name,
    )


def sync_standard(conn: Connection) -> None:
    """Insert the standard resource classes and traits that are missing.

    Idempotent; run by every ``upgrade``. Existing rows are never changed.
    """
    dialects.insert_ignore_explicit_ids(
        conn,
        resource_classes,
        [{"id": i, "name": n} for i, n in enumerate(STANDARD_RESOURCE_CLASSES)],
    )
    have = set(conn.execute(sa.select(traits.c.name)).scalars())
    dialects.insert_ignore(conn, traits, [{"name": n} for n in sorted(STANDARD_TRAITS - have)])


def resource_class_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Map each given resource class name to its id; unknown names are absent."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    rows = conn.execute(
        sa.select(resource_classes.c.name, resource_classes.c.id).where(
            resource_classes.c.name.in_(wanted)
        )
    )
    return {name: rc_id for name, rc_id in rows}


def trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Map each given trait name to its id; unknown names are absent."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    rows = conn.execute(sa.select(traits.c.name, traits.c.id).where(traits.c.name.in_(wanted)))
    return {name: trait_id for name, trait_id in rows}


def require_resource_class_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Like :func:`resource_class_ids` but raise ``InvalidRequest``
    (``rpquery.resource_class.not_found``) naming the first unknown class."""
    wanted = set(names)
    found = resource_class_ids(conn, wanted)
    _raise_missing(wanted, found, "rpquery.resource_class.not_found", "resource class")
    return found


def require_trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Like :func:`trait_ids` but raise ``InvalidRequest`` (``rpquery.trait.not_found``)
    naming the first unknown trait."""
    wanted = set(names)
    found = trait_ids(conn, wanted)
    _raise_missing(wanted, found, "rpquery.trait.not_found", "trait")
    return found


def _raise_missing(wanted: set[str], found: Mapping[str, int], code: str, what: str) -> None:
    missing = sorted(wanted - found.keys())
    if missing:
        raise InvalidRequest(code, f"no such {what}: {', '.join(missing)}", token=missing[0])
