"""Provider summaries of an allocation-candidates answer: the summarised trees'
providers, inventories and trait names, read in one to three statements
(:func:`fetch_summaries`) and kept as read (:class:`~._results.SummaryRows`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.read._clauses import ids_param
from rpquery.read.candidates import _summary_sql as qs
from rpquery.read.candidates._results import SummaryRows
from rpquery.read.candidates._trait_cache import MISSES_MAX, TraitCache, trait_cache
from rpquery.store import dialects
from rpquery.store.runner import driver_rows, json_rows
from rpquery.store.tables import resource_providers

#: At most this many classes are named by bound values in a written summary (the lowest
#: ids: the standard classes); any other is looked up per inventory
SUMMARY_NAMED = 64
#: Summaries of at most this many trees come from one statement
#: (:func:`~._summary_sql.summary_small_stmt`), not two or three: as fast at 16 trees, ~0.1-0.2
#: ms slower at 64 (PostgreSQL, MariaDB, 1,000 hosts; docs/read-path.md)
SUMMARY_SMALL = 32
#: how the text of :func:`every_trait_text` begins on every backend (statement counts
#: in tests)
EVERY_TRAIT_TEXT_SQL = "GROUP BY rpt.resource_provider_id) AS t"

# The fixed statements below are built on first use, each once (``functools.cache``):
# a one-off command builds only those it sends (start-up, docs/benchmarks.md).


@functools.cache
def summary_keyed(trait_ids: bool) -> sa.Select:
    """The summaries' providers of the trees ``tree_ids``, their resources not written
    (written: :func:`_summary`), with what their cached trait ids are checked against,
    with or without the trait ids (:func:`_cached_providers`)."""
    return qs.summary_stmt("tree_ids", keyed=True, trait_ids=trait_ids)


@functools.cache
def summary_traits_of() -> sa.Select:
    return qs.summary_traits_of("summary_ids")


@functools.cache
def summary_inventories() -> sa.Select:
    return qs.summary_inventories_stmt("tree_ids")


@functools.cache
def summary_inventories_of() -> sa.Select:
    return qs.summary_inventories_of("summary_ids")


@functools.cache
def summary_trait_names() -> sa.Select:
    return qs.summary_trait_names_stmt(ids_param("summary_trait_ids"))


@functools.cache
def summary_untraited() -> sa.Select:
    """The summaries' providers without their trait ids, of every tree, with
    :func:`every_trait_text` (MySQL/MariaDB, summaries of nearly the whole cloud:
    :func:`_every_texts`)."""
    return qs.summary_stmt(None, trait_ids=False)


@functools.cache
def every_trait_text() -> sa.Select:
    """Every provider's trait ids as one text (:func:`every_trait_texts`)."""
    return qs.every_trait_text_stmt()


def fetch_summaries(
    conn: Connection,
    root_ids: set[int],
    rc_names: Mapping[int, str],
    *,
    written: bool | None = None,
    inventory: Sequence[Sequence[Any]] | None = None,
    cloud_roots: Sequence[int] | None = None,
) -> SummaryRows:
    """Summaries of every provider in the trees ``root_ids``, kept as read:
    :class:`SummaryRows` writes or shapes them only when rendered or read.
    ``inventory``: (provider ids, class ids, capacities, usages) columns of every
    inventory of those trees (maybe of others too), already read with a group's
    statement (:func:`load_groups` ``summary_rows``); else read here if needed.

    One row per provider with its trait ids (:func:`~._summary_sql.summary_stmt`; on
    MySQL/MariaDB as one JSON text, :func:`json_rows`), or without them when the
    engine's cache of trait sets holds them (:func:`_cached_providers`,
    :mod:`~._trait_cache`), then the names of the distinct ids (one small statement,
    none without traits). Without ``inventory``, resources
    are ``written`` as JSON text by the database where its driver decodes values
    slowly (default: :func:`rpquery.store.dialects.renders_summaries`, MySQL/MariaDB),
    else read as inventory rows (one more statement) for Python to write; a provider
    whose resources the database could not write exactly (a capacity of 2**53 or more)
    has its inventory rows read too.

    ``cloud_roots``: the root of every inventory of the cloud (with ``inventory``);
    when ``root_ids`` are at least half of those trees, on MySQL/MariaDB every
    provider's trait ids come as one text (:func:`every_trait_texts`), not from a
    subquery per summarised provider nor the cache, and every provider is read
    (:func:`_every_texts`)."""
    if written is None:
        written = inventory is None and dialects.renders_summaries(conn)
    params: dict[str, Any] = {"tree_ids": sorted(root_ids)}
    as_json = dialects.rows_as_json(conn)
    read = json_rows if as_json else driver_rows
    named = sorted(rc_names.items())[:SUMMARY_NAMED] if written else []
    params.update(_named_classes(named))
    if len(root_ids) <= SUMMARY_SMALL:  # providers, inventories, trait names: one statement
        with_inventory = not written and inventory is None
        stmt = _summary_small(written, len(named), with_inventory)
        rows = read(conn, stmt, params)
        return _small_summaries(conn, rows, rc_names, inventory, written, with_inventory)
    every_trait = as_json and not written and cloud_roots is not None
    most = every_trait and 2 * len(root_ids) >= len(set(cloud_roots))  # type: ignore[arg-type]
    return _summaries_of(conn, read, params, rc_names, written, len(named), inventory, most)


def _summaries_of(
    conn: Connection,
    read: Callable[[Connection, Any, dict[str, Any]], list[Any]],
    params: dict[str, Any],
    rc_names: Mapping[int, str],
    written: bool,
    named: int,
    inventory: Sequence[Sequence[Any]] | None,
    most: bool,
) -> SummaryRows:
    """:func:`fetch_summaries` of more trees than ``SUMMARY_SMALL`` (``most``: every
    provider's trait ids as one text, :func:`_every_texts`)."""
    column: list[str | None] | None = None
    columns: list[Sequence[Any]] | None = None
    providers: list[Any] = []
    if written:
        providers = _providers(conn, read, params, named)
    else:
        every = _every_texts(conn, read, params) if most else None
        columns, column = every or _cached_providers(conn, read, params)
    if written:
        inventory_rows = _unwritten_inventories(conn, providers)
    elif inventory is None:
        inventory_rows = driver_rows(conn, summary_inventories(), params)
    else:
        inventory_rows = None
    trait_texts = set(column if column is not None else [row[-1] for row in providers])
    return SummaryRows.from_driver(
        providers,
        inventory_rows,
        _trait_names(conn, trait_texts),
        rc_names,
        inventory_columns=inventory,
        trait_column=column,
        provider_columns=columns,
    )


def _providers(
    conn: Connection,
    read: Callable[[Connection, Any, dict[str, Any]], list[Any]],
    params: dict[str, Any],
    named: int,
) -> list[Any]:
    """The summarised providers' rows with their resources written, ``named`` classes
    named by bound values (:func:`fetch_summaries`; the trait cache does not serve
    them)."""
    return read(conn, _summary(named), params)


Read = Callable[[Connection, Any, dict[str, Any]], list[Any]]


def _cached_providers(
    conn: Connection, read: Read, params: dict[str, Any]
) -> tuple[list[Sequence[Any]], list[str | None]]:
    """The summarised providers' columns (:func:`~._summary_sql.summary_stmt` ``keyed``)
    and their trait id texts: when the engine's cache is warm, the rows without trait
    ids and the texts from the cache (:func:`_from_cache`); otherwise (cold, or more
    than :data:`MISSES_MAX` misses) the rows with their trait ids, which fill the cache
    (:mod:`~._trait_cache`)."""
    cache = trait_cache(conn.engine)
    missed = False
    if cache.try_warm(len(params["tree_ids"])):
        columns = _columns(read(conn, summary_keyed(False), params), 7)
        texts = _from_cache(conn, read, cache, columns)
        if texts is not None:
            return columns, texts
        missed = True
    columns = _columns(read(conn, summary_keyed(True), params), 8)
    cache.fill([columns[0], columns[1], columns[5], columns[6], columns[7]], missed=missed)
    return columns, list(columns[7])


def _every_texts(
    conn: Connection, read: Read, params: dict[str, Any]
) -> tuple[list[Sequence[Any]], list[str | None]] | None:
    """Summaries of most of the cloud on MySQL/MariaDB: every provider's trait ids in
    one text (:func:`every_trait_texts`), every provider's row without them
    (:func:`summary_untraited`), those of other trees dropped here (no list of
    thousands of trees to render). Not from the trait cache: that one text costs less
    than the two key columns of every row and the look-up (2026-11-29, MariaDB, whole
    cloud at 5,000 hosts: paired 1.05-1.06 with the cache). ``None`` when the text came
    back cut short."""
    every = every_trait_texts(conn)
    if every is None:
        return None
    root_ids = set(params["tree_ids"])
    rows = [row for row in read(conn, summary_untraited(), {}) if row[4] in root_ids]
    columns = _columns(rows, 5)
    return columns, [every.get(rp_id) for rp_id in columns[0]]


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[Sequence[Any]]:
    """``rows`` as ``width`` columns (one transposition, in C, shared by the cache's
    look-up and fill and :meth:`SummaryRows.from_driver`)."""
    return list(zip(*rows, strict=True)) or [()] * width


def _from_cache(
    conn: Connection, read: Read, cache: TraitCache, columns: Sequence[Sequence[Any]]
) -> list[str | None] | None:
    """The trait id texts of the providers' ``columns`` from ``cache``, those of at most
    :data:`MISSES_MAX` providers it misses read by id (one statement,
    :func:`summary_traits_of`: their generation read again with them, so a provider
    changed since ``rows`` were read is cached under its new one); ``None`` past that."""
    texts, misses = cache.lookup(columns)
    if len(misses) > MISSES_MAX:
        return None
    if misses:
        ids = columns[0]
        found = read(conn, summary_traits_of(), {"summary_ids": [ids[i] for i in misses]})
        cache.fill(_columns(found, 5))
        by_id = {row[0]: row[4] for row in found}
        for i in misses:
            texts[i] = by_id.get(ids[i])
    cache.served()
    return texts


def _named_classes(named: Sequence[tuple[int, str]]) -> dict[str, Any]:
    """The values naming ``named`` classes in written resources: class names bound,
    quoted as JSON (no join per inventory)."""
    params: dict[str, Any] = {}
    for i, (rc, name) in enumerate(named):
        params[f"summary_rc{i}"] = rc
        params[f"summary_rc_name{i}"] = orjson.dumps(name).decode()
    return params


def _unwritten_inventories(conn: Connection, providers: Sequence[Sequence[Any]]) -> list[Any]:
    """The inventory rows of the providers whose resources the database did not write
    (one statement, none when it wrote them all)."""
    unwritten = [row[0] for row in providers if row[5] is None]
    if not unwritten:
        return []
    return driver_rows(conn, summary_inventories_of(), {"summary_ids": unwritten})


def _trait_names(conn: Connection, trait_texts: set[Any]) -> dict[int, str]:
    """The names of the trait ids in ``trait_texts`` (``"12,7,30"`` each, or ``None``):
    one statement, none without traits."""
    trait_texts.discard(None)
    trait_ids = sorted({int(t) for text in trait_texts for t in text.split(",")})
    if not trait_ids:
        return {}
    rows = driver_rows(conn, summary_trait_names(), {"summary_trait_ids": trait_ids})
    return {int(ident): name for ident, name in rows}


def every_trait_texts(conn: Connection) -> dict[int, str] | None:
    """Every provider's trait ids as text (``"12,7,30"``, as
    :func:`~._summary_sql.summary_trait_ids` writes them), by provider id, from one JSON text
    (:func:`~._summary_sql.every_trait_text_stmt`); ``None`` when the text came back cut short
    (fewer providers than counted, no JSON, ``NULL`` past ``max_allowed_packet``): the
    caller reads them per provider instead."""
    ((count, text),) = driver_rows(conn, every_trait_text(), {})
    if not count:
        return {}
    try:
        pairs = orjson.loads(text) if text is not None else None
    except orjson.JSONDecodeError:
        pairs = None
    if not isinstance(pairs, list) or len(pairs) != count:
        return None
    return dict(pairs)


def _small_summaries(
    conn: Connection,
    rows: Sequence[Sequence[Any]],
    rc_names: Mapping[int, str],
    inventory: Sequence[Sequence[Any]] | None,
    written: bool,
    with_inventory: bool,
) -> SummaryRows:
    """:class:`SummaryRows` of :func:`~._summary_sql.summary_small_stmt`'s rows: a provider's
    has a uuid, an inventory's neither a uuid nor a name, a trait's a name only. The
    inventory rows of providers whose resources the database did not write come from
    one more statement, as in :func:`fetch_summaries`."""
    providers: list[Sequence[Any]] = []
    inventory_rows: list[tuple[Any, ...]] = []
    trait_names: dict[int, str] = {}
    for row in rows:
        if row[1] is not None:
            providers.append(row[:-1] if with_inventory else row)
        elif row[2] is not None:
            trait_names[int(row[0])] = row[2]
        else:  # (provider, class, capacity, used)
            inventory_rows.append((row[0], row[3], row[-1], row[4]))
    unwritten = [row[0] for row in providers if row[5] is None] if written else []
    if unwritten:
        inventory_rows = driver_rows(conn, summary_inventories_of(), {"summary_ids": unwritten})
    return SummaryRows.from_driver(
        providers,
        inventory_rows if inventory is None else None,
        trait_names,
        rc_names,
        inventory_columns=inventory,
    )


@functools.lru_cache(maxsize=32)
def _summary_small(written: bool, named: int, inventories: bool) -> sa.CompoundSelect:
    return qs.summary_small_stmt(
        "tree_ids", resources=written, named=named, inventories=inventories
    )


@functools.lru_cache(maxsize=8)
def _summary(named: int) -> sa.Select:
    """The summaries' providers with their resources written, ``named`` classes named
    by bound values (:func:`~rpquery.read.candidates._summary_sql.summary_resources`)."""
    return qs.summary_stmt("tree_ids", resources=True, named=named)


def fetch_uuids(conn: Connection, ids: set[int]) -> dict[int, str]:
    """Uuids of providers outside the summarised trees (an anchor that only sharing
    providers served): ``SELECT id, uuid FROM resource_providers WHERE id IN (:ids)``."""
    rows = conn.execute(_uuids(), {"uuid_ids": sorted(ids)})
    return {int(ident): uuid for ident, uuid in rows}


@functools.cache
def _uuids() -> sa.Select:
    rp = resource_providers
    return sa.select(rp.c.id, rp.c.uuid).where(rp.c.id.in_(ids_param("uuid_ids")))
