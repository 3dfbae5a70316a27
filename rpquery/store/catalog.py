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

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import os_resource_classes as orc
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery._validation import check_text, matches
from rpquery.errors import Conflict, InUse, InvalidRequest, NotFound
from rpquery.retry import LOCKED_WRITES, retrying
from rpquery.store import dialects
from rpquery.store.tables import (
    CUSTOM_RC_MIN_ID,
    allocations,
    inventories,
    resource_classes,
    resource_provider_traits,
    traits,
)

if TYPE_CHECKING:
    from rpquery.db import Database

__all__ = [
    "CUSTOM_NAME_RE",
    "STANDARD_RESOURCE_CLASSES",
    "STANDARD_TRAITS",
    "check_resource_class_name",
    "check_trait_name",
    "create_resource_class",
    "create_trait",
    "delete_resource_class",
    "delete_trait",
    "has_resource_class",
    "has_trait",
    "is_known_standard_resource_class",
    "is_known_standard_trait",
    "is_valid_custom_name",
    "list_resource_classes",
    "list_traits",
    "raise_missing",
    "require_resource_class_ids",
    "require_trait_ids",
    "resource_class_ids",
    "sync_standard",
    "trait_ids",
    "update_resource_class",
]

CUSTOM_NAME_RE = re.compile(r"CUSTOM_[A-Z0-9_]+")
STANDARD_RESOURCE_CLASSES: tuple[str, ...] = tuple(orc.STANDARDS)
if TYPE_CHECKING:
    STANDARD_TRAITS: frozenset[str]


@functools.cache
def _standard_traits() -> frozenset[str]:
    """``STANDARD_TRAITS``, read from os_traits on first use: os_traits imports its whole
    package tree, which a request naming no standard trait does not need (start-up time)."""
    import os_traits

    return frozenset(os_traits.get_traits())


def __getattr__(name: str) -> Any:
    if name == "STANDARD_TRAITS":
        return _standard_traits()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_valid_custom_name(name: object) -> bool:
    """``CUSTOM_[A-Z0-9_]+`` as a whole string (no trailing newline)."""
    return matches(CUSTOM_NAME_RE, name)


def is_known_standard_trait(name: object) -> bool:
    return isinstance(name, str) and name in _standard_traits()


def is_known_standard_resource_class(name: object) -> bool:
    return isinstance(name, str) and name in STANDARD_RESOURCE_CLASSES


def check_trait_name(name: object) -> str:
    """Return ``name`` if it is a standard trait or a well-formed custom one, else raise
    ``InvalidRequest`` (``rpquery.trait.bad_name``). Needs no database."""
    if is_valid_custom_name(name) or is_known_standard_trait(name):
        return str(name)
    raise InvalidRequest(
        "rpquery.trait.bad_name",
        f"invalid trait name {name!r}: not a standard trait and not CUSTOM_[A-Z0-9_]+",
        token=str(name),
    )


def check_resource_class_name(name: object) -> str:
    """Return ``name`` if it is a standard class or a well-formed custom one, else raise
    ``InvalidRequest`` (``rpquery.resource_class.bad_name``). Needs no database."""
    if is_known_standard_resource_class(name) or is_valid_custom_name(name):
        return str(name)
    raise InvalidRequest(
        "rpquery.resource_class.bad_name",
        f"invalid resource class {name!r}: not a standard class and not CUSTOM_[A-Z0-9_]+",
        token=str(name),
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
    dialects.insert_ignore(conn, traits, [{"name": n} for n in sorted(_standard_traits() - have)])


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
    raise_missing(wanted, found, "rpquery.resource_class.not_found", "resource class")
    return found


def require_trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Like :func:`trait_ids` but raise ``InvalidRequest`` (``rpquery.trait.not_found``)
    naming the first unknown trait."""
    wanted = set(names)
    found = trait_ids(conn, wanted)
    raise_missing(wanted, found, "rpquery.trait.not_found", "trait")
    return found


def raise_missing(wanted: Iterable[str], found: Mapping[str, int], code: str, what: str) -> None:
    """``InvalidRequest`` ``code`` ("no such <what>: A, B") naming the ``wanted`` names
    absent from ``found``, the first (sorted) as its token; nothing when all are there.
    The one message for unknown resource classes and traits, read and write paths."""
    missing = sorted(set(wanted) - found.keys())
    if missing:
        raise InvalidRequest(code, f"no such {what}: {', '.join(missing)}", token=missing[0])


# ---------------------------------------------------------------- custom classes and traits
#
# Write functions for custom resource classes and traits (the write-path owner's
# additions). Standard names are fixed: they can be neither created nor deleted here.

_ID_ATTEMPTS = 5


class _IdTaken(Exception):
    """Internal: another writer took the custom class id we picked; pick again."""


def _check_custom(name: object, what: str) -> str:
    if not isinstance(name, str) or not is_valid_custom_name(name) or len(name) > 255:
        raise InvalidRequest(
            f"rpquery.{what}.bad_name",
            f"invalid custom {what.replace('_', ' ')} {name!r}: must match CUSTOM_[A-Z0-9_]+",
            token=str(name),
        )
    return name


def create_resource_class(db: Database, name: str) -> int:
    """Create custom resource class ``name`` and return its id (10000 and up).

    ``InvalidRequest`` ``rpquery.resource_class.bad_name`` unless the name is
    ``CUSTOM_[A-Z0-9_]+``; ``Conflict`` ``rpquery.resource_class.exists`` if it exists.
    Two creators racing for the same id retry with the next one.

    >>> # create_resource_class(db, "CUSTOM_FPGA")  -> 10000 on a fresh database
    """
    _check_custom(name, "resource_class")
    rc = resource_classes

    def once() -> int:
        with db.begin() as conn:
            if resource_class_ids(conn, [name]):
                raise Conflict(
                    "rpquery.resource_class.exists", f"{name} already exists", token=name
                )
            top = conn.execute(
                sa.select(sa.func.max(rc.c.id)).where(rc.c.id >= CUSTOM_RC_MIN_ID)
            ).scalar()
            new_id = max(int(top or 0) + 1, CUSTOM_RC_MIN_ID)
            try:
                conn.execute(rc.insert().values(id=new_id, name=name))
            except sa.exc.IntegrityError as error:
                raise _IdTaken(f"custom resource class id {new_id} was taken") from error
            return new_id

    try:
        return retrying(
            once,
            replace(LOCKED_WRITES, attempts=_ID_ATTEMPTS),
            retry_if=lambda e: isinstance(e, _IdTaken),
            logger="rpquery.store",
            what=f"create resource class {name}",
        )
    except _IdTaken:
        raise Conflict(
            "rpquery.resource_class.exists", f"could not create {name}", token=name
        ) from None


def delete_resource_class(db: Database, name: str) -> None:
    """Delete a custom resource class. ``InvalidRequest`` ``rpquery.resource_class.standard``
    for a standard class, ``NotFound`` ``rpquery.resource_class.not_found``, ``InUse``
    ``rpquery.resource_class.in_use`` while any inventory or allocation uses it."""
    if is_known_standard_resource_class(name):
        raise InvalidRequest(
            "rpquery.resource_class.standard", f"cannot delete standard class {name}", token=name
        )
    _check_custom(name, "resource_class")
    with db.begin() as conn:
        found = resource_class_ids(conn, [name]).get(name)
        if found is None:
            raise NotFound("rpquery.resource_class.not_found", f"no class {name}", token=name)
        used = sa.select(
            sa.exists().where(inventories.c.resource_class_id == found)
            | sa.exists().where(allocations.c.resource_class_id == found)
        )
        if conn.execute(used).scalar():
            raise InUse("rpquery.resource_class.in_use", f"{name} is in use", token=name)
        conn.execute(resource_classes.delete().where(resource_classes.c.id == found))


def list_resource_classes(db: Database) -> list[str]:
    """Every resource class name, standard ones first (by id), then custom ones."""
    with db.connect() as conn:
        stmt = sa.select(resource_classes.c.name).order_by(resource_classes.c.id)
        return list(conn.execute(stmt).scalars())


def create_trait(db: Database, name: str) -> bool:
    """Create custom trait ``name``; ``True`` if it was created, ``False`` if it existed
    (idempotent, like Placement's ``PUT /traits/{name}``). ``InvalidRequest``
    ``rpquery.trait.bad_name`` unless the name is ``CUSTOM_[A-Z0-9_]+``."""
    _check_custom(name, "trait")
    with db.begin() as conn:
        if trait_ids(conn, [name]):
            return False
        dialects.insert_ignore(conn, traits, [{"name": name}])
        return True


def delete_trait(db: Database, name: str) -> None:
    """Delete a custom trait. ``InvalidRequest`` ``rpquery.trait.standard`` for a standard
    trait, ``NotFound`` ``rpquery.trait.not_found``, ``InUse`` ``rpquery.trait.in_use``
    while a provider has it."""
    if is_known_standard_trait(name):
        raise InvalidRequest(
            "rpquery.trait.standard", f"cannot delete standard trait {name}", token=name
        )
    _check_custom(name, "trait")
    with db.begin() as conn:
        found = trait_ids(conn, [name]).get(name)
        if found is None:
            raise NotFound("rpquery.trait.not_found", f"no trait {name}", token=name)
        links = resource_provider_traits
        if conn.execute(sa.select(sa.exists().where(links.c.trait_id == found))).scalar():
            raise InUse("rpquery.trait.in_use", f"{name} is set on a provider", token=name)
        try:
            conn.execute(traits.delete().where(traits.c.id == found))
        except sa.exc.IntegrityError as error:
            raise InUse("rpquery.trait.in_use", f"{name} is set on a provider") from error


def list_traits(
    db: Database,
    *,
    prefix: str | None = None,
    names: Iterable[str] | None = None,
    associated: bool | None = None,
) -> list[str]:
    """Trait names, sorted; only those starting with ``prefix`` when given
    (Placement's ``name=startswith:``; ``rpquery.trait.bad_prefix`` for a prefix that is
    not storable text), only those in ``names`` (``name=in:``), only those some provider
    has (``associated=true``) or none has (``false``)."""
    stmt = sa.select(traits.c.name).order_by(traits.c.name)
    if prefix is not None:
        check_text(prefix, "rpquery.trait.bad_prefix", "trait name prefix", allow_empty=True)
    if prefix:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        stmt = stmt.where(traits.c.name.like(escaped + "%", escape="\\"))
    if names is not None:
        stmt = stmt.where(traits.c.name.in_(sorted(set(names))))
    if associated is not None:
        linked = sa.exists().where(resource_provider_traits.c.trait_id == traits.c.id)
        stmt = stmt.where(linked if associated else ~linked)
    with db.connect() as conn:
        return list(conn.execute(stmt).scalars())


def has_resource_class(db: Database, name: str) -> bool:
    """Does resource class ``name`` exist (standard or custom)?"""
    with db.connect() as conn:
        return bool(resource_class_ids(conn, [name]))


def has_trait(db: Database, name: str) -> bool:
    """Does trait ``name`` exist (standard or custom)?"""
    with db.connect() as conn:
        return bool(trait_ids(conn, [name]))


def update_resource_class(db: Database, name: str, new_name: str) -> None:
    """Rename custom resource class ``name`` to ``new_name`` (Placement's ``PUT
    /resource_classes/{name}`` before microversion 1.7). ``InvalidRequest``
    ``rpquery.resource_class.standard`` for a standard class, ``NotFound``
    ``rpquery.resource_class.not_found``, ``Conflict`` ``rpquery.resource_class.exists``
    when ``new_name`` is taken; the id, and so every inventory and allocation, stays."""
    if name in STANDARD_RESOURCE_CLASSES:
        raise InvalidRequest(
            "rpquery.resource_class.standard", f"cannot update standard class {name}", token=name
        )
    _check_custom(new_name, "resource_class")
    with db.begin() as conn:
        found = resource_class_ids(conn, [name, new_name])
        if name not in found:
            raise NotFound("rpquery.resource_class.not_found", f"no class {name}", token=name)
        if new_name in found and new_name != name:
            raise Conflict(
                "rpquery.resource_class.exists", f"{new_name} already exists", token=new_name
            )
        try:
            conn.execute(
                resource_classes.update()
                .where(resource_classes.c.id == found[name])
                .values(name=new_name)
            )
        except sa.exc.IntegrityError as error:
            raise Conflict(
                "rpquery.resource_class.exists", f"{new_name} already exists", token=new_name
            ) from error
