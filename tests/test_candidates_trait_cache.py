"""The summaries' trait sets cached between reads (:mod:`rpquery.read.candidates._trait_cache`),
on every backend: a trait change through rpquery's writes (which bump the provider's
generation, as Placement's do) is in the next read's summaries; a provider deleted and
created again under the same uuid (SQLite reuses its rowid) is not taken for the old
one; a warm read sends no more statements than a cold one, plus one for the few
providers it misses, and reads every trait id again past :data:`MISSES_MAX`.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa

from rpquery import (
    Database,
    allocation_candidates,
    create_provider,
    create_trait,
    delete_provider,
    set_inventories,
    set_provider_traits,
)
from rpquery.models import Inventory
from rpquery.read.candidates import _summaries as sm
from rpquery.read.candidates import _trait_cache as tc
from rpquery.store.tables import resource_providers
from tests.differential.placement import Placement
from tests.side_by_side_api import READY, SKIP_REASON, req

REQUEST = "resources=VCPU:1"


@pytest.fixture(autouse=True)
def big_summaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Summaries read as a big answer's (the small answers' one statement reads no
    generation and never uses the cache)."""
    monkeypatch.setattr(sm, "SUMMARY_SMALL", 0)


def _host(db: Database, name: str, traits: list[str], uuid: str | None = None) -> tuple[str, int]:
    """A root provider with one VCPU and ``traits``: its uuid and generation."""
    rp = create_provider(db, name, uuid=uuid)
    gen = set_inventories(db, rp.uuid, {"VCPU": Inventory(total=4)}, generation=rp.generation)
    return rp.uuid, set_provider_traits(db, rp.uuid, traits, generation=gen)


def _traits(db: Database) -> tuple[dict[str, frozenset[str]], int]:
    """Every summarised provider's traits by uuid, and the statements the read took."""
    with db.count_statements() as counter:
        answer = allocation_candidates(db, REQUEST)
    return {u: s.traits for u, s in answer.provider_summaries.items()}, counter.count


@pytest.fixture
def custom(db: Database) -> list[str]:
    """Three custom traits, and four trees no answer here summarises: the answers
    cover less than half of the cloud's trees (on MySQL/MariaDB, most of them would
    read every provider's trait ids in one text instead, :func:`sm.every_trait_texts`)."""
    names = ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"]
    for name in names:
        create_trait(db, name)
    for i in range(4):
        rp = create_provider(db, f"disk{i}")
        set_inventories(db, rp.uuid, {"DISK_GB": Inventory(total=10)}, generation=0)
    return names


def test_a_trait_change_is_in_the_next_read(db: Database, custom: list[str]) -> None:
    hosts = {f"h{i}": _host(db, f"h{i}", ["CUSTOM_A"]) for i in range(3)}
    cold, cold_count = _traits(db)
    assert cold == {u: frozenset({"CUSTOM_A"}) for u, _ in hosts.values()}
    warm, warm_count = _traits(db)
    assert warm == cold
    assert warm_count == cold_count  # every trait set from the cache: no statement more
    uuid, gen = hosts["h1"]
    set_provider_traits(db, uuid, ["CUSTOM_B", "CUSTOM_C"], generation=gen)
    changed, changed_count = _traits(db)
    assert changed == {**cold, uuid: frozenset({"CUSTOM_B", "CUSTOM_C"})}
    assert changed_count == cold_count + 1  # the one provider missed: read by id
    set_provider_traits(db, uuid, [], generation=gen + 1)
    assert _traits(db)[0] == {**cold, uuid: frozenset()}


def _id_of(db: Database, uuid: str) -> int:
    rp = resource_providers
    with db.connect() as conn:
        return int(conn.execute(sa.select(rp.c.id).where(rp.c.uuid == uuid)).scalar_one())


def test_a_provider_created_again_is_not_the_old_one(db: Database, custom: list[str]) -> None:
    _host(db, "h0", ["CUSTOM_C"])
    uuid, gen = _host(db, "h1", ["CUSTOM_A"])
    first = _id_of(db, uuid)
    assert _traits(db)[0][uuid] == frozenset({"CUSTOM_A"})
    delete_provider(db, uuid)
    again, again_gen = _host(db, "h1", ["CUSTOM_B"], uuid=uuid)
    assert (again, again_gen) == (uuid, gen)  # same uuid, same generation
    if db.dialect_name == "sqlite":  # the highest rowid, deleted, is taken again
        assert _id_of(db, uuid) == first
    assert _traits(db)[0][uuid] == frozenset({"CUSTOM_B"})


def test_past_the_misses_bound_every_trait_id_is_read_again(
    db: Database, custom: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sm, "MISSES_MAX", 1)
    hosts = [_host(db, f"h{i}", ["CUSTOM_A"]) for i in range(3)]
    cold, cold_count = _traits(db)
    for uuid, gen in hosts[:2]:
        set_provider_traits(db, uuid, ["CUSTOM_B"], generation=gen)
    changed, count = _traits(db)
    assert changed == {**cold, **{u: frozenset({"CUSTOM_B"}) for u, _ in hosts[:2]}}
    assert count == cold_count + 1  # the statement without trait ids, then the one with
    assert _traits(db) == (changed, cold_count)  # backs off: straight to the trait ids
    assert _traits(db) == (changed, cold_count)  # warm again, every set cached


def test_each_engine_has_its_own_cache(db: Database) -> None:
    other = Database(db.engine.url)
    try:
        assert tc.trait_cache(db.engine) is tc.trait_cache(db.engine)
        assert tc.trait_cache(other.engine) is not tc.trait_cache(db.engine)
    finally:
        other.dispose()


def _columns(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return list(zip(*rows, strict=True))


def test_a_full_cache_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tc, "CACHE_SIZE", 4)
    cache = tc.TraitCache()
    cache.fill(_columns([(i, f"u{i}", 1, "t", "7") for i in range(3)]))
    assert len(cache) == 3
    cache.fill(_columns([(i, f"u{i}", 1, "t", "7") for i in range(3, 5)]))
    assert len(cache) == 2  # emptied first: never above CACHE_SIZE
    rows = [(3, "u3", "n", None, 3, 1, "t"), (0, "u0", "n", None, 0, 1, "t")]
    assert cache.lookup(_columns(rows)) == (["7", None], [1])
    stale = [(3, "u3", "n", None, 3, 2, "t"), (4, "u9", "n", None, 4, 1, "t")]
    assert cache.lookup(_columns(stale)) == ([None, None], [0, 1])  # generation, uuid differ


def test_concurrent_fills_and_lookups_stay_bounded_and_consistent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tc, "CACHE_SIZE", 64)
    cache = tc.TraitCache()
    errors: list[str] = []

    def work(offset: int) -> None:
        for round_ in range(200):
            keyed = [(offset + i, f"u{offset + i}", round_, "t", str(i)) for i in range(20)]
            cache.fill(_columns(keyed))
            rows = [(rp, u, "n", None, rp, g, c) for rp, u, g, c, _ in keyed]
            texts, _ = cache.lookup(_columns(rows))
            wrong = [t for t, k in zip(texts, keyed, strict=True) if t not in (None, k[4])]
            if wrong or len(cache) > 64:
                errors.append(f"{offset}/{round_}: {wrong} {len(cache)}")

    threads = [threading.Thread(target=work, args=(k * 1000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.skipif(not READY, reason=SKIP_REASON)
def test_placement_changing_traits_on_the_same_database_is_seen(
    db: Database, custom: list[str]
) -> None:
    """Placement 16.0 itself changes a provider's traits (``PUT .../traits``, which
    bumps its generation) on the database rpquery reads with a warm cache."""
    uuid, gen = _host(db, "h0", ["CUSTOM_A"])
    other, _ = _host(db, "h1", ["CUSTOM_A"])
    assert _traits(db)[0][uuid] == frozenset({"CUSTOM_A"})
    assert _traits(db)[0][uuid] == frozenset({"CUSTOM_A"})  # warm
    placement = Placement(db.url.render_as_string(hide_password=False))
    try:
        body = {"traits": ["CUSTOM_C"], "resource_provider_generation": gen}
        (put,) = placement.ask([req("PUT", f"/resource_providers/{uuid}/traits", body)])
    finally:
        placement.close()
    assert put["status"] == 200, put
    assert put["body"]["resource_provider_generation"] == gen + 1
    seen = _traits(db)[0]
    assert seen == {uuid: frozenset({"CUSTOM_C"}), other: frozenset({"CUSTOM_A"})}
