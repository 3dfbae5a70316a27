"""Resource provider writes: create, rename, re-parent / un-parent, delete.

>>> # rp = create_provider(db, "cn1")
>>> # numa = create_provider(db, "cn1_numa0", parent_uuid=rp.uuid)
>>> # numa = set_parent(db, numa.uuid, None, generation=numa.generation)  # now a root

Trees follow Placement ≥ 1.37: a provider may be moved under any provider outside its
own subtree, or made a root. Its whole subtree's ``root_provider_id`` is updated by a
single ``UPDATE ... WHERE id IN (<recursive subtree query>)`` — never row by row.

Renaming and re-parenting are guarded by the provider generation (conditional
``UPDATE``); both raise it by one. Deleting needs no generation but is refused while the
provider has children (``rpquery.provider.has_children``) or allocations
(``rpquery.provider.in_use``); its inventories, trait and aggregate links go with it.

``get_provider`` and ``provider_select`` live in :mod:`rpquery.read.objects` and are
re-exported here.
"""

from __future__ import annotations

import uuid as uuidlib

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from rpquery import _validation
from rpquery._validation import check_int, check_uuid
from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, Conflict, InUse, InvalidRequest, NotFound
from rpquery.models import ResourceProvider
from rpquery.read.objects import get_provider, load_provider, provider_select
from rpquery.store import dialects
from rpquery.store.tables import (
    allocations,
    inventories,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
)

__all__ = [
    "GENERATION_CONFLICT",
    "MAX_NAME_LENGTH",
    "check_generation",
    "check_name",
    "claim_generation",
    "create_provider",
    "delete_provider",
    "get_provider",
    "has_nested",
    "provider_select",
    "rename_provider",
    "set_parent",
    "subtree_ids",
    "update_provider",
]

GENERATION_CONFLICT = "rpquery.provider.generation_conflict"
MAX_NAME_LENGTH = 200


# ---------------------------------------------------------------- pure pieces


def check_name(name: object) -> str:
    """A provider name is a non-blank string of at most 200 characters, no NUL and no
    lone surrogate (``rpquery.provider.bad_name``)."""
    return _validation.check_name(
        name, "rpquery.provider.bad_name", "provider name", max_length=MAX_NAME_LENGTH
    )


def check_generation(generation: object) -> int:
    return check_int(generation, "rpquery.provider.bad_generation", "generation")


def subtree_ids(rp_id: int) -> sa.Select:
    """Ids of provider ``rp_id`` and every provider below it.

    ``SELECT id FROM (WITH RECURSIVE subtree(id) AS (SELECT id ... WHERE id = :rp
    UNION SELECT child.id FROM resource_providers child JOIN subtree ON
    child.parent_provider_id = subtree.id) SELECT id FROM subtree) AS subtree_ids``

    ``UNION`` (not ``UNION ALL``) so the recursion ends even on a damaged tree that
    holds a cycle. The CTE is nested inside a derived table so it can sit in an ``UPDATE``'s
    ``WHERE`` on every backend (MariaDB reads the table it updates only that way).
    """
    rp = resource_providers
    tree = sa.select(rp.c.id).where(rp.c.id == rp_id).cte("subtree", recursive=True, nesting=True)
    child = rp.alias("child")
    tree = tree.union(sa.select(child.c.id).where(child.c.parent_provider_id == tree.c.id))
    derived = sa.select(tree.c.id).subquery("subtree_ids")
    return sa.select(derived.c.id)


# ---------------------------------------------------------------- writes


def has_nested(db: Database) -> bool:
    """Whether any provider has a parent (Placement's "has trees")."""
    rp = resource_providers
    with db.connect() as conn:
        stmt = sa.select(sa.exists().where(rp.c.parent_provider_id.is_not(None)))
        return bool(conn.execute(stmt).scalar())


def claim_generation(conn: Connection, rp_uuid: str, generation: int) -> int:
    """Raise the generation of provider ``rp_uuid`` from ``generation`` (the value the
    caller read) by one, and return the provider id.

    Writes guarded by the provider generation (inventories, traits, aggregates) call
    this first: the conditional ``UPDATE`` both checks the generation and takes the row
    lock, so concurrent writers to the same provider queue behind it. ``NotFound``
    ``rpquery.provider.not_found``; ``ConcurrentUpdate``
    ``rpquery.provider.generation_conflict``.
    """
    rp = resource_providers
    row = conn.execute(sa.select(rp.c.id, rp.c.generation).where(rp.c.uuid == rp_uuid)).first()
    if row is None:
        raise NotFound("rpquery.provider.not_found", f"no provider {rp_uuid}", token=rp_uuid)
    result = conn.execute(
        rp.update()
        .where(rp.c.id == row.id, rp.c.generation == generation)
        .values(generation=rp.c.generation + 1)
    )
    if result.rowcount != 1:
        raise ConcurrentUpdate(
            GENERATION_CONFLICT,
            f"provider {rp_uuid} is at generation {row.generation}, not {generation}",
            token=rp_uuid,
            provider=rp_uuid,
            expected_generation=generation,
            actual_generation=row.generation,
        )
    return int(row.id)


def _duplicate(conn: Connection, name: str, rp_uuid: str, error: Exception) -> Conflict:
    detail = f"a provider named {name!r} or with uuid {rp_uuid} already exists"
    twin = _collation_twin(conn, name)
    if twin is not None:
        detail = (
            f"provider name {name!r} is taken: resource_providers.name compares with "
            f"{twin[1]}, which takes it for the existing provider {twin[0]!r} (case, accents "
            "and trailing spaces are ignored)"
        )
    conflict = Conflict("rpquery.provider.duplicate", detail, token=name)
    conflict.__cause__ = error
    return conflict


def _collation_twin(conn: Connection, name: str) -> tuple[str, str] | None:
    """MySQL/MariaDB: the existing name the column's collation takes ``name`` for, with
    the collation (``None`` when the name itself is taken, and on the other backends,
    where a failed statement also ends the transaction)."""
    collation = dialects.backend(conn.dialect.name).column_collation(
        conn, "resource_providers", "name"
    )
    if collation is None:
        return None
    rp = resource_providers
    found = conn.execute(sa.select(rp.c.name).where(rp.c.name == name).limit(1)).scalar()
    if found is None or found == name:
        return None
    return str(found), collation


def _checked_parent(parent_uuid: str | None) -> str | None:
    """A new parent's uuid, checked (``rpquery.provider.bad_uuid``); ``None``: a root."""
    if parent_uuid is None:
        return None
    return check_uuid(parent_uuid, "rpquery.provider.bad_uuid", "provider")


def create_provider(
    db: Database, name: str, *, uuid: str | None = None, parent_uuid: str | None = None
) -> ResourceProvider:
    """Create a provider at generation 0, a root unless ``parent_uuid`` is given.

    Errors: ``rpquery.provider.bad_name``, ``rpquery.provider.bad_uuid``,
    ``rpquery.provider.parent_not_found`` (InvalidRequest), ``rpquery.provider.duplicate``
    (Conflict: name or uuid taken).
    """
    check_name(name)
    rp_uuid = (
        check_uuid(uuid, "rpquery.provider.bad_uuid", "provider")
        if uuid is not None
        else str(uuidlib.uuid4())
    )
    parent = _checked_parent(parent_uuid)
    rp = resource_providers
    with db.begin() as conn:
        parent_id, root_id = None, None
        if parent is not None:
            parent_id, root_id = _parent_ids(conn, parent)
        try:
            result = conn.execute(
                rp.insert().values(
                    uuid=rp_uuid, name=name, generation=0, parent_provider_id=parent_id
                )
            )
        except exc.IntegrityError as error:
            raise _duplicate(conn, name, rp_uuid, error) from error
        new_id = int(result.inserted_primary_key[0])  # type: ignore[index]
        conn.execute(
            rp.update().where(rp.c.id == new_id).values(root_provider_id=root_id or new_id)
        )
        return load_provider(conn, rp_uuid)[1]


def _bump(
    conn: Connection, rp_id: int, found: ResourceProvider, generation: int, **values: object
) -> None:
    """``UPDATE ... SET generation = generation + 1, <values> WHERE id AND generation``;
    ``found`` is the provider as read in this transaction (its uuid and generation go
    into the conflict)."""
    rp = resource_providers
    result = conn.execute(
        rp.update()
        .where(rp.c.id == rp_id, rp.c.generation == generation)
        .values(generation=rp.c.generation + 1, **values)
    )
    if result.rowcount != 1:
        raise ConcurrentUpdate(
            GENERATION_CONFLICT,
            f"provider generation conflict: expected {generation}",
            token=str(generation),
            provider=found.uuid,
            expected_generation=generation,
            actual_generation=found.generation,
        )


def rename_provider(db: Database, rp_uuid: str, name: str, *, generation: int) -> ResourceProvider:
    """Rename a provider at ``generation`` (``rpquery.provider.generation_conflict`` if it
    moved on; ``rpquery.provider.duplicate`` if the name is taken)."""
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    check_name(name)
    check_generation(generation)
    with db.begin() as conn:
        rp_id, found = load_provider(conn, rp_uuid)
        try:
            _bump(conn, rp_id, found, generation, name=name)
        except exc.IntegrityError as error:
            raise _duplicate(conn, name, rp_uuid, error) from error
        return load_provider(conn, rp_uuid)[1]


def set_parent(
    db: Database, rp_uuid: str, parent_uuid: str | None, *, generation: int
) -> ResourceProvider:
    """Move a provider (with its subtree) under ``parent_uuid``, or make it a root with
    ``None``. Refused with ``InvalidRequest`` ``rpquery.provider.cycle`` when the new
    parent is the provider itself or one of its descendants, and
    ``rpquery.provider.parent_not_found`` when the parent does not exist."""
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    parent = _checked_parent(parent_uuid)
    check_generation(generation)
    rp = resource_providers
    with db.begin() as conn:
        rp_id, found = load_provider(conn, rp_uuid)
        parent_id, new_root = None, rp_id
        if parent is not None:
            parent_id, new_root = _parent_ids(conn, parent)
            _refuse_cycle(conn, rp_id, rp_uuid, parent, parent_id)
        _bump(conn, rp_id, found, generation, parent_provider_id=parent_id)
        conn.execute(
            rp.update().where(rp.c.id.in_(subtree_ids(rp_id))).values(root_provider_id=new_root)
        )
        return load_provider(conn, rp_uuid)[1]


def delete_provider(db: Database, rp_uuid: str) -> None:
    """Delete a provider with its inventories, trait links and aggregate links.

    Refused (``InUse``) while it has children (``rpquery.provider.has_children``) or
    allocations (``rpquery.provider.in_use``). An allocation written concurrently raises
    the provider generation, so the final conditional ``DELETE`` fails with
    ``rpquery.provider.generation_conflict`` instead of orphaning it.
    """
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    rp = resource_providers
    with db.begin() as conn:
        rp_id, found = load_provider(conn, rp_uuid)
        has_children = sa.exists().where(rp.c.parent_provider_id == rp_id)
        has_allocs = sa.exists().where(allocations.c.resource_provider_id == rp_id)
        children, used = conn.execute(sa.select(has_children, has_allocs)).one()
        if children:
            raise InUse(
                "rpquery.provider.has_children", f"provider {rp_uuid} has children", token=rp_uuid
            )
        if used:
            raise InUse(
                "rpquery.provider.in_use", f"provider {rp_uuid} has allocations", token=rp_uuid
            )
        for link in (inventories, resource_provider_traits, resource_provider_aggregates):
            conn.execute(link.delete().where(link.c.resource_provider_id == rp_id))
        conn.execute(rp.update().where(rp.c.id == rp_id).values(root_provider_id=None))
        result = conn.execute(
            rp.delete().where(rp.c.id == rp_id, rp.c.generation == found.generation)
        )
        if result.rowcount != 1:
            raise ConcurrentUpdate(
                GENERATION_CONFLICT,
                f"provider {rp_uuid} changed while being deleted",
                provider=rp_uuid,
                expected_generation=found.generation,
            )


_KEEP = object()


def update_provider(
    db: Database,
    rp_uuid: str,
    *,
    name: str | None = None,
    parent_uuid: str | None | object = _KEEP,
    allow_reparenting: bool = True,
) -> ResourceProvider:
    """Placement's ``PUT /resource_providers/{uuid}``: rename and/or move a provider in
    one transaction, without a generation check and without raising the generation
    (Placement's rule for this call; last writer wins).

    ``parent_uuid`` left out keeps the parent; ``None`` makes the provider a root. With
    ``allow_reparenting=False`` (microversions before 1.37) only a root may be given a
    parent: ``InvalidRequest`` ``rpquery.provider.reparent_not_allowed`` /
    ``rpquery.provider.unparent_not_allowed`` otherwise. Other errors as
    :func:`rename_provider` and :func:`set_parent`.
    """
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    if name is not None:
        check_name(name)
    rp = resource_providers
    with db.begin() as conn:
        rp_id, found = load_provider(conn, rp_uuid)
        values: dict[str, object] = {}
        if name is not None and name != found.name:
            values["name"] = name
        new_root: int | None = None
        if parent_uuid is not _KEEP and parent_uuid != found.parent_uuid:
            new_root, values["parent_provider_id"] = _new_parent(
                conn, rp_id, found, parent_uuid, allow_reparenting  # type: ignore[arg-type]
            )
        if values:
            try:
                conn.execute(rp.update().where(rp.c.id == rp_id).values(**values))
            except exc.IntegrityError as error:
                raise _duplicate(conn, str(name), rp_uuid, error) from error
        if new_root is not None:
            conn.execute(
                rp.update().where(rp.c.id.in_(subtree_ids(rp_id))).values(root_provider_id=new_root)
            )
        return load_provider(conn, rp_uuid)[1]


def _new_parent(
    conn: Connection,
    rp_id: int,
    found: ResourceProvider,
    parent_uuid: str | None,
    allow_reparenting: bool,
) -> tuple[int, int | None]:
    """``(new root id, new parent id)`` for moving ``found`` under ``parent_uuid``."""
    if parent_uuid is None:
        if not allow_reparenting:
            raise InvalidRequest(
                "rpquery.provider.unparent_not_allowed",
                "un-parenting a provider is not allowed before microversion 1.37",
                token=found.uuid,
            )
        return rp_id, None
    parent = check_uuid(parent_uuid, "rpquery.provider.bad_uuid", "provider")
    parent_id, root_id = _parent_ids(conn, parent)
    if found.parent_uuid is not None and not allow_reparenting:
        raise InvalidRequest(
            "rpquery.provider.reparent_not_allowed",
            "re-parenting a provider is not allowed before microversion 1.37",
            token=parent,
        )
    _refuse_cycle(conn, rp_id, found.uuid, parent, parent_id)
    return root_id, parent_id


def _parent_ids(conn: Connection, parent: str) -> tuple[int, int]:
    """The id and root id of provider ``parent``, a provider's new parent
    (``InvalidRequest`` ``rpquery.provider.parent_not_found`` if there is none)."""
    rp = resource_providers
    stmt = sa.select(rp.c.id, rp.c.root_provider_id).where(rp.c.uuid == parent)
    row = conn.execute(stmt).first()
    if row is None:
        raise InvalidRequest(
            "rpquery.provider.parent_not_found", f"no provider {parent}", token=parent
        )
    return int(row[0]), int(row[1])


def _refuse_cycle(conn: Connection, rp_id: int, rp_uuid: str, parent: str, parent_id: int) -> None:
    """``InvalidRequest`` ``rpquery.provider.cycle`` if the new parent ``parent_id`` is
    provider ``rp_id`` itself or below it."""
    below = subtree_ids(rp_id).subquery()
    if conn.execute(sa.select(below.c.id).where(below.c.id == parent_id)).first():
        raise InvalidRequest(
            "rpquery.provider.cycle",
            f"provider {parent} is {rp_uuid} or below it: that would make a cycle",
            token=parent,
        )
