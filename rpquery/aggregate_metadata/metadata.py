"""Aggregate metadata (docs/aggregate-metadata.md): storage per aggregate uuid, and the
flavor filter as a :class:`~rpquery.policies.base.HostPolicy` on the candidate and
provider-list queries.

Storage is rpquery's own table ``rpq_aggregate_metadata`` (key → value strings per
Placement aggregate uuid). Writes validate everything before the transaction starts:

>>> validate_items({"force_metadata_check": "yes"})
Traceback (most recent call last):
...
rpquery.errors.InvalidRequest: force_metadata_check must be "True" or "False", not 'yes' \
(rpquery.aggregate_metadata.bad_force_metadata_check)

The filter pushes into SQL what SQL decides (``*`` → hosts having the key, ``!``/``~``
→ hosts not having it, literal values → equality; as ``IN`` / ``NOT IN`` semi-joins)
and evaluates the rest in Python (:mod:`rpquery.aggregate_metadata.extra_specs`) on metadata
fetched for every candidate host in one statement::

    policy = AggregateMetadataFilter({"ssd": "true", "hw:cpu_policy": "dedicated"})
    candidates = allocation_candidates(db, request, policies=[policy])
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement, Select

from rpquery import _validation as validation
from rpquery.aggregate_metadata.extra_specs import (
    FORCE_KEY,
    SCOPE,
    FlavorFilter,
    FlavorKey,
    ValueSpec,
)
from rpquery.db import Database
from rpquery.errors import InvalidRequest, NotFound, invalid
from rpquery.policies.base import HostPolicy
from rpquery.store.tables import (
    aggregate_metadata as am,
)
from rpquery.store.tables import (
    placement_aggregates,
    resource_provider_aggregates,
    utcnow,
)

__all__ = [
    "MAX_KEY_LENGTH",
    "MAX_VALUE_LENGTH",
    "AggregateMetadata",
    "AggregateMetadataFilter",
    "check_aggregate_uuid",
    "check_key",
    "check_value",
    "forcing_aggregates",
    "get_metadata",
    "host_metadata_stmt",
    "hosts_with_key",
    "key_clause",
    "list_metadata",
    "metadata_stmt",
    "policy_from_cli",
    "replace_metadata",
    "roots_clause",
    "set_metadata",
    "unset_metadata",
    "validate_items",
]

MAX_KEY_LENGTH = 255
MAX_VALUE_LENGTH = 255
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class AggregateMetadata:
    """The metadata of one aggregate after a read or write.

    >>> AggregateMetadata("a" * 8, {"ssd": "true"}).as_dict()
    {'aggregate_uuid': 'aaaaaaaa', 'metadata': {'ssd': 'true'}}
    """

    aggregate_uuid: str
    items: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", MappingProxyType(dict(sorted(self.items.items()))))

    def as_dict(self) -> dict[str, Any]:
        return {"aggregate_uuid": self.aggregate_uuid, "metadata": dict(self.items)}


# --------------------------------------------------------------------- validation


def check_aggregate_uuid(value: object) -> str:
    """An aggregate uuid, canonical (:func:`rpquery._validation.check_uuid`): the form
    stored and compared, so upper and lower case name one aggregate on every backend."""
    return validation.check_uuid(value, "rpquery.aggregate_metadata.bad_uuid", "aggregate")


def check_key(key: object) -> str:
    """Keys: 1..255 characters, no control characters, no surrounding whitespace."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise invalid(
            "rpquery.aggregate_metadata.bad_key",
            f"keys must be 1 to {MAX_KEY_LENGTH} characters",
            str(key),
        )
    if key != key.strip() or _CONTROL_RE.search(key) or validation.text_problem(key):
        raise invalid(
            "rpquery.aggregate_metadata.bad_key",
            f"key {key!r} has surrounding whitespace, control characters or lone surrogates",
            key,
        )
    return key


def check_value(key: str, value: object) -> str:
    """Values: strings up to 255 characters; ``!`` never combined with anything;
    ``force_metadata_check`` only "True"/"False" (any case), stored as "True"/"False"."""
    if (
        not isinstance(value, str)
        or len(value) > MAX_VALUE_LENGTH
        or _CONTROL_RE.search(value)
        or validation.text_problem(value)
    ):
        raise invalid(
            "rpquery.aggregate_metadata.bad_value",
            f"value of {key!r} must be at most {MAX_VALUE_LENGTH} printable characters",
            str(value),
        )
    if key == FORCE_KEY:
        if value.strip().lower() not in ("true", "false"):
            raise invalid(
                "rpquery.aggregate_metadata.bad_force_metadata_check",
                f'force_metadata_check must be "True" or "False", not {value!r}',
                value,
            )
        return "True" if value.strip().lower() == "true" else "False"
    if ValueSpec.parse(value).exclusive_violation:
        raise invalid(
            "rpquery.aggregate_metadata.exclusive_sentinel",
            f"{key}={value!r}: '!' cannot be combined with other values",
            value,
        )
    return value


def validate_items(items: Mapping[str, str]) -> dict[str, str]:
    """Check keys and values to write; returns them normalised (see :func:`check_value`)."""
    if not isinstance(items, Mapping) or not items:
        raise invalid(
            "rpquery.aggregate_metadata.empty", "give at least one KEY=VALUE", str(items)
        )
    return {check_key(k): check_value(k, v) for k, v in items.items()}


# --------------------------------------------------------------------- storage


def metadata_stmt(aggregate_uuids: Iterable[str] | None = None) -> Select[Any]:
    """``SELECT aggregate_uuid, key, value`` for some aggregates (all when ``None``)."""
    stmt = sa.select(am.c.aggregate_uuid, am.c.key, am.c.value).order_by(
        am.c.aggregate_uuid, am.c.key
    )
    if aggregate_uuids is not None:
        stmt = stmt.where(am.c.aggregate_uuid.in_(list(aggregate_uuids)))
    return stmt


def _read(conn: Connection, aggregate_uuid: str) -> dict[str, str]:
    rows = conn.execute(metadata_stmt([aggregate_uuid])).all()
    return {row.key: row.value for row in rows}


def get_metadata(db: Database, aggregate_uuid: str) -> AggregateMetadata:
    """The metadata of one aggregate (empty when it has none)."""
    aggregate_uuid = check_aggregate_uuid(aggregate_uuid)
    with db.connect() as conn:
        return AggregateMetadata(aggregate_uuid, _read(conn, aggregate_uuid))


def list_metadata(db: Database) -> list[AggregateMetadata]:
    """Every aggregate that has metadata, by uuid."""
    found: dict[str, dict[str, str]] = {}
    with db.connect() as conn:
        for row in conn.execute(metadata_stmt()):
            found.setdefault(row.aggregate_uuid, {})[row.key] = row.value
    return [AggregateMetadata(uuid, items) for uuid, items in found.items()]


def _write(
    conn: Connection, aggregate_uuid: str, current: Mapping[str, str], items: Mapping[str, str]
) -> None:
    now = utcnow()
    for key, value in items.items():
        if key not in current:
            continue
        if current[key] != value:
            conn.execute(
                am.update()
                .where(am.c.aggregate_uuid == aggregate_uuid, am.c.key == key)
                .values(value=value, updated_at=now)
            )
    new = [
        {"aggregate_uuid": aggregate_uuid, "key": k, "value": v, "created_at": now}
        for k, v in items.items()
        if k not in current
    ]
    if new:
        conn.execute(am.insert(), new)


def set_metadata(db: Database, aggregate_uuid: str, items: Mapping[str, str]) -> AggregateMetadata:
    """Set (add or update) keys of one aggregate in one transaction; other keys stay.

    >>> set_metadata(db, agg, {"ssd": "true", "force_metadata_check": "true"})  # doctest: +SKIP
    AggregateMetadata(aggregate_uuid=..., items={'force_metadata_check': 'True', 'ssd': 'true'})
    """
    aggregate_uuid = check_aggregate_uuid(aggregate_uuid)
    checked = validate_items(items)
    with db.begin() as conn:
        current = _read(conn, aggregate_uuid)
        _write(conn, aggregate_uuid, current, checked)
        return AggregateMetadata(aggregate_uuid, {**current, **checked})


def replace_metadata(
    db: Database, aggregate_uuid: str, items: Mapping[str, str]
) -> AggregateMetadata:
    """Make ``items`` the whole metadata of one aggregate (empty ``items`` clears it)."""
    aggregate_uuid = check_aggregate_uuid(aggregate_uuid)
    checked = {} if isinstance(items, Mapping) and not items else validate_items(items)
    with db.begin() as conn:
        current = _read(conn, aggregate_uuid)
        gone = [k for k in current if k not in checked]
        if gone:
            conn.execute(
                am.delete().where(am.c.aggregate_uuid == aggregate_uuid, am.c.key.in_(gone))
            )
        _write(conn, aggregate_uuid, {k: v for k, v in current.items() if k in checked}, checked)
        return AggregateMetadata(aggregate_uuid, checked)


def unset_metadata(db: Database, aggregate_uuid: str, keys: Iterable[str]) -> AggregateMetadata:
    """Delete keys of one aggregate; all or nothing: an unknown key raises
    :class:`NotFound` (``rpquery.aggregate_metadata.key_not_found``) and deletes none."""
    aggregate_uuid = check_aggregate_uuid(aggregate_uuid)
    given = validation.check_str_list(keys, "rpquery.aggregate_metadata.bad_key", "keys")
    wanted = sorted({check_key(k) for k in given})
    if not wanted:
        raise invalid("rpquery.aggregate_metadata.empty", "give at least one KEY to unset", "")
    with db.begin() as conn:
        current = _read(conn, aggregate_uuid)
        missing = [k for k in wanted if k not in current]
        if missing:
            raise NotFound(
                "rpquery.aggregate_metadata.key_not_found",
                f"aggregate {aggregate_uuid} has no metadata key {missing[0]!r}",
                token=missing[0],
            )
        conn.execute(
            am.delete().where(am.c.aggregate_uuid == aggregate_uuid, am.c.key.in_(wanted))
        )
        return AggregateMetadata(
            aggregate_uuid, {k: v for k, v in current.items() if k not in wanted}
        )


# --------------------------------------------------------------------- SQL pieces


def hosts_with_key(key: str, values: Sequence[str] | None = None) -> Select[Any]:
    """Ids of the roots with a metadata row for ``key`` on one of their aggregates; with
    ``values``, a row whose value is one of them or whose aggregate forces the metadata
    check (its values are patterns only Python judges)::

        SELECT rpa.resource_provider_id FROM rpq_aggregate_metadata m
          JOIN placement_aggregates pa ON pa.uuid = m.aggregate_uuid
          JOIN resource_provider_aggregates rpa ON rpa.aggregate_id = pa.id
          WHERE m.key = :key [AND (m.value IN (...) OR m.aggregate_uuid IN (<forcing>))]

    Uncorrelated, so every backend evaluates it once per statement (a semi-join), not
    once per candidate row.
    """
    m = am.alias("am_m")
    pa = placement_aggregates.alias("am_pa")
    rpa = resource_provider_aggregates.alias("am_rpa")
    joined = m.join(pa, pa.c.uuid == m.c.aggregate_uuid).join(rpa, rpa.c.aggregate_id == pa.c.id)
    stmt = sa.select(rpa.c.resource_provider_id).select_from(joined).where(m.c.key == key)
    if values is not None:
        forced = m.c.aggregate_uuid.in_(forcing_aggregates())
        stmt = stmt.where(sa.or_(m.c.value.in_(sorted(set(values))), forced))
    return stmt


def forcing_aggregates() -> Select[Any]:
    """Uuids of aggregates with ``force_metadata_check`` "true" (any case)."""
    f = am.alias("am_force")
    return sa.select(f.c.aggregate_uuid).where(
        f.c.key == FORCE_KEY, sa.func.lower(sa.func.trim(f.c.value)) == "true"
    )


def key_clause(root_id: ColumnElement[int], fk: FlavorKey) -> ColumnElement[bool] | None:
    """What SQL can decide for one flavor key (a necessary condition; Python decides
    the rest). ``None`` when SQL cannot narrow (namespaced keys, ``<or> * <or> ~``)."""
    spec = fk.spec
    if fk.optional or (spec.any and spec.optional):
        return None
    parts: list[ColumnElement[bool]] = []
    if spec.optional or spec.absent:
        parts.append(root_id.not_in(hosts_with_key(fk.key)))
    if spec.any or any(alt.op is not None for alt in spec.alternatives):
        parts.append(root_id.in_(hosts_with_key(fk.key)))
    elif spec.alternatives:
        literals = [alt.text for alt in spec.alternatives]
        parts.append(root_id.in_(hosts_with_key(fk.key, literals)))
    return sa.or_(*parts) if parts else None


def roots_clause(column: ColumnElement[int], root_ids: Sequence[int]) -> ColumnElement[bool]:
    """Select the candidate roots: ``IN (...)`` for a sparse set, ``BETWEEN min AND max``
    for a dense one (a long ``IN`` list costs an index probe per value; callers drop the
    extra rows a range brings in).

    >>> str(roots_clause(resource_provider_aggregates.c.resource_provider_id, range(1, 500)))
    'resource_provider_aggregates.resource_provider_id BETWEEN :resource_provider_id_1 AND \
:resource_provider_id_2'
    """
    low, high = min(root_ids), max(root_ids)
    if len(root_ids) > 100 and high - low < 4 * len(root_ids):
        return column.between(low, high)
    ids: Any = sa.bindparam("am_root_ids", list(root_ids), expanding=True, literal_execute=True)
    return column.in_(ids)


def host_metadata_stmt(root_ids: Sequence[int], keys: Iterable[str], *, forced: bool) -> Any:
    """One statement for :meth:`AggregateMetadataFilter.keep`: memberships of the
    candidate roots (in aggregates that have metadata) UNION ALL the metadata rows whose
    key the flavor names (plus every row of forcing aggregates when ``forced``)::

        SELECT rpa.resource_provider_id, pa.uuid, NULL, NULL FROM rpa JOIN pa ...
          WHERE rpa.resource_provider_id IN (...) AND EXISTS (metadata of pa.uuid)
        UNION ALL
        SELECT NULL, m.aggregate_uuid, m.key, m.value FROM m
          WHERE m.key IN (...) OR m.aggregate_uuid IN (<forcing aggregates>)
    """
    pa, rpa = placement_aggregates, resource_provider_aggregates
    has_meta = sa.exists(sa.select(sa.literal(1)).where(am.c.aggregate_uuid == pa.c.uuid))
    members = (
        sa.select(
            rpa.c.resource_provider_id.label("root_id"),
            pa.c.uuid.label("aggregate_uuid"),
            sa.cast(sa.null(), am.c.key.type).label("key"),
            sa.cast(sa.null(), am.c.value.type).label("value"),
        )
        .select_from(rpa.join(pa, pa.c.id == rpa.c.aggregate_id))
        .where(roots_clause(rpa.c.resource_provider_id, root_ids), has_meta)
    )
    wanted: ColumnElement[bool] = am.c.key.in_(sorted(set(keys)))
    if forced:
        wanted = sa.or_(wanted, am.c.aggregate_uuid.in_(forcing_aggregates()))
    rows = sa.select(
        sa.cast(sa.null(), sa.Integer).label("root_id"), am.c.aggregate_uuid, am.c.key, am.c.value
    ).where(wanted)
    return sa.union_all(members, rows)


# --------------------------------------------------------------------- the policy


@dataclass(frozen=True, eq=False)
class AggregateMetadataFilter:
    """The aggregate-metadata flavor filter as a :class:`HostPolicy` (hosts = root providers).

    Extra specs are validated at construction (``InvalidRequest`` before any SQL).
    ``nova_compat=True`` selects nova's AggregateInstanceExtraSpecsFilter behaviour.

    >>> AggregateMetadataFilter({"key": "<or> ! <or> 1"})
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: extra spec key='<or> ! <or> 1': '!' cannot be combined \
with other values (rpquery.extra_specs.exclusive_sentinel)
    """

    extra_specs: Mapping[str, str]
    nova_compat: bool = False
    flavor: FlavorFilter = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        flavor = FlavorFilter.from_specs(self.extra_specs, nova_compat=self.nova_compat)
        object.__setattr__(self, "flavor", flavor)
        object.__setattr__(self, "extra_specs", MappingProxyType(dict(flavor.specs)))

    @property
    def needs_all_candidates(self) -> bool:
        return not self.flavor.is_noop

    def where(self, root_id: ColumnElement[int]) -> ColumnElement[bool] | None:
        """Necessary conditions in SQL; ``None`` when nothing can be pushed down."""
        parts: list[ColumnElement[bool]]
        if self.nova_compat:
            keys = sorted({k for k in map(_nova_key, self.extra_specs) if k is not None})
            parts = [root_id.in_(hosts_with_key(k)) for k in keys]
        else:
            found = (key_clause(root_id, fk) for fk in self.flavor.keys)
            parts = [c for c in found if c is not None]
        return sa.and_(*parts) if parts else None

    def keep(self, conn: Connection, root_ids: Sequence[int]) -> set[int] | None:
        """Evaluate every candidate host in Python on metadata fetched in one statement;
        hosts in the same set of aggregates are evaluated once."""
        if self.flavor.is_noop:
            return None
        if not root_ids:
            return set()
        members, metadata = self._fetch(conn, root_ids)
        verdicts: dict[frozenset[str], bool] = {}
        kept: set[int] = set()
        for root_id in root_ids:
            aggs = frozenset(members.get(root_id, ()))
            if aggs not in verdicts:
                verdicts[aggs] = self.flavor.passes(metadata.get(a, {}) for a in sorted(aggs))
            if verdicts[aggs]:
                kept.add(root_id)
        return kept

    def weigh(self, conn: Connection, root_ids: Sequence[int]) -> Mapping[int, float] | None:
        return None

    def _fetch(
        self, conn: Connection, root_ids: Sequence[int]
    ) -> tuple[dict[int, set[str]], dict[str, dict[str, str]]]:
        if self.nova_compat:
            keys = {k for k in map(_nova_key, self.extra_specs) if k is not None}
        else:
            keys = {fk.key for fk in self.flavor.keys} | {FORCE_KEY}
        stmt = host_metadata_stmt(root_ids, keys, forced=not self.nova_compat)
        wanted = set(root_ids)
        members: dict[int, set[str]] = {}
        metadata: dict[str, dict[str, str]] = {}
        for row in conn.execute(stmt):
            if row.root_id is not None:
                if int(row.root_id) in wanted:
                    members.setdefault(int(row.root_id), set()).add(row.aggregate_uuid)
            else:
                metadata.setdefault(row.aggregate_uuid, {})[row.key] = row.value
        return members, metadata


def _nova_key(key: str) -> str | None:
    """The metadata key nova checks for a flavor key, or ``None`` when it skips it."""
    scope, sep, rest = key.partition(":")
    if not sep:
        return key
    return rest if scope == SCOPE else None


def policy_from_cli(extra_specs_json: str | None, nova_compat: bool) -> HostPolicy | None:
    """The policy for ``--extra-specs '<json object>'`` and ``--nova-compat`` (``None``
    when no extra specs are given). Bad JSON → ``rpquery.extra_specs.bad_json``.

    >>> policy_from_cli('{"ssd": "true"}', False).extra_specs["ssd"]
    'true'
    """
    if extra_specs_json is None:
        return None
    try:
        specs = json.loads(extra_specs_json)
    except ValueError as exc:
        raise InvalidRequest(
            "rpquery.extra_specs.bad_json",
            f"--extra-specs is not valid JSON: {exc}",
            token=extra_specs_json,
        ) from exc
    if not isinstance(specs, dict):
        raise InvalidRequest(
            "rpquery.extra_specs.bad_type",
            "--extra-specs must be a JSON object of strings",
            token=extra_specs_json,
        )
    return AggregateMetadataFilter(specs, nova_compat=nova_compat)
