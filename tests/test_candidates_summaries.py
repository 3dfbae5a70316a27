"""Provider summaries of allocation candidates, on every backend, both ways they are read
(:func:`rpquery.read.candidates._summaries.fetch_summaries`): resources written as JSON
by the database (MySQL/MariaDB's default) or read as inventory rows and written in
Python (SQLite's and PostgreSQL's). Capacity is ``int((total - reserved) *
allocation_ratio)``, truncated toward zero as Placement's Python does; traits are
listed by name, or in the order the caller's key gives (the API's: standard first).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from rpquery.api.handlers.allocation_candidates import _trait_order
from rpquery.db import Database
from rpquery.read._names import resolve_names
from rpquery.read.candidates import (
    ProviderSummary,
    ResourceSummary,
    _render,
    allocation_candidates,
)
from rpquery.read.candidates import _batches as bt
from rpquery.read.candidates import _execute as ex
from rpquery.read.candidates import _summaries as sm
from rpquery.read.candidates._results import SummaryRows
from rpquery.read.candidates._spread import spread
from rpquery.read.request import parse_candidates
from rpquery.store import dialects, runner
from tests.factories import Ref, allocate, new_uuid, provider

INT_MAX = 2**31 - 1  # inventories.total is a 32-bit INTEGER on PostgreSQL and MySQL

#: (total, reserved, allocation_ratio) → Python's capacity, int() of the float product
CAPACITIES = {
    "CUSTOM_R07": (10, 0, 0.7, 7),  # 7.000000000000001
    "CUSTOM_HALF": (3, 0, 0.5, 1),  # 1.5, truncated (a cast would round to 2)
    "CUSTOM_R15": (10, 3, 1.5, 10),  # 10.5
    "CUSTOM_THIRD": (3, 0, 0.333333, 0),  # 0.999999
    "CUSTOM_R16": (7, 1, 16.0, 96),
    "CUSTOM_BELOW": (INT_MAX, 0, 4e6, int(INT_MAX * 4e6)),  # < 2**53: written
}
#: from 2**53 on the database does not write a capacity: read as rows (ratios of at
#: most 6 significant digits: MySQL's 32-bit FLOAT column reads back as written)
HUGE = {"CUSTOM_HUGE": (INT_MAX, 0, 5e6, int(INT_MAX * 5e6))}

#: names whose orders differ by codepoint, case of "CUSTOM", underscores
TRAITS = ["CUSTOM_Z", "CUSTOM_9", "CUSTOM_A_B", "CUSTOM_AB", "HW_Z", "AB", "A_B", "CUSTOMER_X"]


def _inventory(spec: dict[str, tuple[int, int, float, int]]) -> dict[str, Any]:
    return {
        rc: {"total": total, "reserved": reserved, "allocation_ratio": ratio, "max_unit": 1}
        for rc, (total, reserved, ratio, _) in spec.items()
    }


@pytest.fixture
def trees(db: Database) -> dict[str, Ref]:
    with db.begin() as conn:
        cn = provider(
            conn,
            "cn",
            inventory={"VCPU": 8, "MEMORY_MB": 4096, **_inventory(CAPACITIES)},
            traits=TRAITS,
        )
        numa = provider(conn, "cn-numa0", parent=cn, inventory={"VCPU": 4})
        bare = provider(conn, "cn-bare", parent=numa)  # no inventory, no trait
        huge = provider(conn, "huge", inventory={"VCPU": 2, **_inventory(HUGE)})
        allocate(conn, "c-1", cn, "VCPU", 3)
        allocate(conn, "c-2", numa, "VCPU", 1)
    return {"cn": cn, "numa": numa, "bare": bare, "huge": huge}


def _fetch(db: Database, roots: set[int], written: bool) -> tuple[SummaryRows, int]:
    """The summaries of the trees ``roots`` and how many statements they took."""
    with db.engine.connect() as conn:
        rc_names = resolve_names(conn, (), (), every_class=True).rc_names
        with db.count_statements() as counter:
            rows = sm.fetch_summaries(conn, roots, rc_names, written=written)
    return rows, counter.count


def _expected(trees: dict[str, Ref]) -> dict[str, ProviderSummary]:
    cn, numa, bare, huge = trees["cn"], trees["numa"], trees["bare"], trees["huge"]
    cn_resources = {rc: ResourceSummary(cap, 0) for rc, (*_, cap) in CAPACITIES.items()}
    cn_resources.update(VCPU=ResourceSummary(8, 3), MEMORY_MB=ResourceSummary(4096, 0))
    huge_resources = {rc: ResourceSummary(cap, 0) for rc, (*_, cap) in HUGE.items()}
    huge_resources["VCPU"] = ResourceSummary(2, 0)
    return {
        cn.uuid: ProviderSummary(cn.uuid, "cn", None, cn.uuid, cn_resources, frozenset(TRAITS)),
        numa.uuid: ProviderSummary(
            numa.uuid, "cn-numa0", cn.uuid, cn.uuid, {"VCPU": ResourceSummary(4, 1)}, frozenset()
        ),
        bare.uuid: ProviderSummary(bare.uuid, "cn-bare", numa.uuid, cn.uuid, {}, frozenset()),
        huge.uuid: ProviderSummary(
            huge.uuid, "huge", None, huge.uuid, huge_resources, frozenset()
        ),
    }


@pytest.fixture(params=["small", "big"])
def answer_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Summaries read as a small answer's (one statement,
    :func:`~rpquery.read.candidates._summary_sql.summary_small_stmt`) or as a big one's."""
    if request.param == "big":
        monkeypatch.setattr(sm, "SUMMARY_SMALL", 0)
    return str(request.param)


@pytest.fixture
def big_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tiny clouds read as a big cloud's answers are: batches and summaries of
    many trees (the small ones' one batch and one summary statement off)."""
    monkeypatch.setattr(sm, "SUMMARY_SMALL", 0)
    monkeypatch.setattr(bt.Batches, "ONE_BATCH", 0)


@pytest.mark.parametrize("written", [False, True], ids=["rows", "written"])
def test_summaries_capacity_truncated_toward_zero(
    db: Database, trees: dict[str, Ref], written: bool, answer_size: str
) -> None:
    rows, count = _fetch(db, {trees["cn"].id, trees["huge"].id}, written)
    expected = _expected(trees)
    assert rows.build() == expected
    assert rows.uuid_by_id == {t.id: t.uuid for t in trees.values()}
    if answer_size == "big":
        # providers, trait names, and (rows) inventories or (written) the inventories of
        # the one provider whose capacity the database could not write
        assert count == 3
    else:  # all in one, and (written) the inventories of that provider
        assert count == (2 if written else 1)
    # the body: the same content, traits by name or in the key's order
    body = orjson.loads(_render.summaries_json(rows, None))
    assert body == rows.render()
    assert list(body) == sorted(expected)  # by uuid
    assert body[trees["cn"].uuid]["traits"] == sorted(TRAITS)
    by_api = orjson.loads(_render.summaries_json(rows, _trait_order))
    assert by_api[trees["cn"].uuid]["traits"] == [
        "AB", "A_B", "CUSTOMER_X", "HW_Z", "CUSTOM_9", "CUSTOM_AB", "CUSTOM_A_B", "CUSTOM_Z"
    ]  # fmt: skip
    assert by_api[trees["bare"].uuid] == {
        "resources": {},
        "traits": [],
        "parent_provider_uuid": trees["numa"].uuid,
        "root_provider_uuid": trees["cn"].uuid,
    }


def test_written_resources_name_classes_not_bound(db: Database, trees: dict[str, Ref]) -> None:
    """The database names a class the caller did not bind (created after the request
    read its names, or past ``SUMMARY_NAMED``) itself: the same summaries."""
    with db.engine.connect() as conn:
        every = resolve_names(conn, (), (), every_class=True).rc_names
        some = {rc: name for rc, name in every.items() if name in ("VCPU", "CUSTOM_HALF")}
        rows = sm.fetch_summaries(conn, {trees["cn"].id}, some, written=True)
    assert rows.build() == {
        u: s for u, s in _expected(trees).items() if s.root_uuid == trees["cn"].uuid
    }


def test_written_resources_need_no_inventory_rows(
    db: Database, trees: dict[str, Ref], answer_size: str
) -> None:
    """Without a capacity of 2**53 or more, the database writes every provider's
    resources: two statements (providers, trait names; one for a small answer), none
    per inventory."""
    small = answer_size == "small"
    rows, count = _fetch(db, {trees["cn"].id}, written=True)
    assert count == (1 if small else 2)
    assert rows.build() == {
        u: s for u, s in _expected(trees).items() if s.root_uuid == trees["cn"].uuid
    }
    _, count = _fetch(db, {trees["huge"].id}, written=False)
    # providers and inventories: no trait, no names (small: with them, in one)
    assert count == (1 if small else 2)


def test_allocation_candidates_body_and_objects_agree(db: Database, trees: dict[str, Ref]) -> None:
    got = allocation_candidates(db, "resources=VCPU:1")
    summaries = got.provider_summaries
    assert summaries == _expected(trees)
    placement = got.to_placement()
    assert orjson.loads(got.to_placement_json()) == placement
    for summary in placement["provider_summaries"].values():
        summary["traits"].sort(key=_trait_order)
    assert orjson.loads(got.to_placement_json(trait_key=_trait_order)) == placement


def test_whole_cloud_summaries_read_with_the_group_rows(
    db: Database, trees: dict[str, Ref], big_paths: None
) -> None:
    """A whole-cloud answer (every root, no ``limit``), and a ``limit``'s walk whose
    batches hold no sharing provider, read the summaries' inventory rows with their
    group's statement, on every backend (MySQL/MariaDB too, where that statement's
    rows come as one text): one statement fewer, the same summaries (capacities
    truncated, the 2**53 one included, which the database would not write)."""
    with db.engine.connect() as conn:
        as_json = dialects.rows_as_json(conn)
    with db.count_statements() as counter:
        whole = allocation_candidates(db, "resources=VCPU:1")
    # names and sharing pairs, the group, providers, trait names; on MySQL/MariaDB
    # every provider's trait ids as one text first (both trees are summarised)
    assert counter.count == 4 + as_json, counter.statements
    assert whole.provider_summaries == _expected(trees)
    every_trait = [sm.EVERY_TRAIT_TEXT_SQL in st for st in counter.statements]
    assert every_trait == [False, False, *([True] if as_json else []), False, False]
    # MariaDB hash-joins the whole tables of the one pass, never a batch's range
    mariadb = getattr(db.engine.dialect, "is_mariadb", False)
    hashed = [dialects.WHOLE_TABLES in st for st in counter.statements]
    assert hashed == [False, mariadb, *([False] if as_json else []), False, False]
    with db.count_statements() as counter:
        limited = allocation_candidates(db, "resources=VCPU:1&limit=10")
    # the same and the batch's roots; trait ids per provider (not every root read)
    assert counter.count == 5, counter.statements
    assert not any(dialects.WHOLE_TABLES in st for st in counter.statements)
    assert not any(sm.EVERY_TRAIT_TEXT_SQL in st for st in counter.statements)
    assert limited.provider_summaries == _expected(trees)
    # the same candidates, round-robin over the two trees (limited answers' order)
    assert limited.to_placement() == {
        **whole.to_placement(),
        "allocation_requests": spread(
            whole.to_placement()["allocation_requests"],
            root_of=lambda ar: limited.provider_summaries[next(iter(ar["allocations"]))].root_uuid,
        ),
    }
    # a tree none of whose providers is returned is not summarised, though its
    # inventories were read with the group's rows (one tree of two: half the cloud's,
    # every trait still read at once, the trait cache warm or not)
    with db.count_statements() as counter:
        only_cn = allocation_candidates(db, "resources=VCPU:3")
    assert only_cn.provider_summaries == {
        u: s for u, s in _expected(trees).items() if s.root_uuid == trees["cn"].uuid
    }
    assert any(sm.EVERY_TRAIT_TEXT_SQL in st for st in counter.statements) == as_json
    with db.begin() as conn:
        for i in range(2):  # two more trees: cn's is no longer half the cloud's
            provider(conn, f"more-{i}", inventory={"VCPU": 1})
    with db.count_statements() as counter:
        again = allocation_candidates(db, "resources=VCPU:3")
    assert again.provider_summaries == only_cn.provider_summaries
    assert not any(sm.EVERY_TRAIT_TEXT_SQL in st for st in counter.statements)


def test_member_of_reads_only_its_trees(db: Database, trees: dict[str, Ref]) -> None:
    """A group with ``member_of`` reads the inventories of the trees its aggregates
    pick, not every inventory of the cloud with the filter in a ``fits`` flag (the one
    pass of a whole-cloud answer): at 1,000 hosts the bench's sharing request read
    4,036 rows for 229 that way. Its summaries are read apart, the same."""
    agg = new_uuid()
    with db.begin() as conn:
        member = provider(conn, "member", inventory={"VCPU": 4}, aggregates=[agg])
    with db.count_statements() as counter:
        whole = allocation_candidates(db, "resources=VCPU:1")
    assert any(" AS fits" in st for st in counter.statements)  # the one pass
    with db.count_statements() as counter:
        only = allocation_candidates(db, f"resources=VCPU:1&member_of={agg}")
    assert not any(" AS fits" in st for st in counter.statements), counter.statements
    assert set(only.provider_summaries) == {member.uuid}
    assert only.provider_summaries[member.uuid] == whole.provider_summaries[member.uuid]


def test_every_trait_at_once_as_per_provider(
    db: Database, trees: dict[str, Ref], monkeypatch: pytest.MonkeyPatch, big_paths: None
) -> None:
    """Summaries whose trait ids came for every provider as one text
    (the trees all the cloud's: MySQL/MariaDB) are those read per provider, on every backend (the
    others read them per provider anyway); a text cut short (``group_concat_max_len``
    made tiny) is read per provider too."""
    with db.begin() as conn:
        provider(conn, "other", inventory={"VCPU": 1}, traits=["CUSTOM_Z", "HW_Z"])
    roots = {trees["cn"].id, trees["huge"].id}

    def summaries(database: Database, every_trait: bool) -> tuple[dict[str, Any], int]:
        with database.engine.connect() as conn:
            rc_names = resolve_names(conn, (), (), every_class=True).rc_names
            with database.count_statements() as counter:
                cloud = sorted(roots) if every_trait else None  # trees all of the cloud's
                rows = sm.fetch_summaries(conn, roots, rc_names, written=False, cloud_roots=cloud)
        return rows.render(), counter.count

    per_provider, statements = summaries(db, False)
    at_once, more = summaries(db, True)
    assert at_once == per_provider and len(at_once) == 4
    with db.engine.connect() as conn:
        texts = sm.every_trait_texts(conn)
        if not dialects.rows_as_json(conn):
            assert more == statements
            return
    assert more == statements + 1
    # every provider with traits, its ids as the per-provider subquery writes them
    assert texts is not None and len(texts) == 2
    assert sorted(texts[trees["cn"].id].split(",")) == sorted(
        str(t) for t in _trait_ids(db, trees["cn"].id)
    )
    # long enough for each provider's ids, too short for the text of all
    monkeypatch.setattr(dialects._mysql, "GROUP_CONCAT_MAX_LEN", max(map(len, texts.values())) + 1)
    tiny = Database(db.url)  # a fresh engine compiles the statements with that length
    try:
        with tiny.engine.connect() as short:
            assert sm.every_trait_texts(short) is None
        cut, _ = summaries(tiny, True)
        assert cut == per_provider
    finally:
        tiny.dispose()


def _trait_ids(db: Database, rp_id: int) -> list[int]:
    rpt = sa.table(
        "resource_provider_traits", sa.column("resource_provider_id"), sa.column("trait_id")
    )
    with db.engine.connect() as conn:
        stmt = sa.select(rpt.c.trait_id).where(rpt.c.resource_provider_id == rp_id)
        return list(conn.execute(stmt).scalars())


def test_uuid_needing_escapes(db: Database) -> None:
    """A uuid that JSON must escape is written through orjson, not the template."""
    with db.begin() as conn:
        odd = provider(conn, "odd", uuid='od"d\\1', inventory={"VCPU": 4}, traits=["HW_Z"])
    for written in (False, True):
        rows, _ = _fetch(db, {odd.id}, written)
        text = _render.summaries_json(rows, None)
        assert (
            orjson.loads(text)
            == rows.render()
            == {
                'od"d\\1': {
                    "resources": {"VCPU": {"capacity": 4, "used": 0}},
                    "traits": ["HW_Z"],
                    "parent_provider_uuid": None,
                    "root_provider_uuid": 'od"d\\1',
                }
            }
        )


def test_many_traits_are_never_cut(db: Database) -> None:
    """A provider's trait ids as one text are longer than MySQL 8's default
    ``group_concat_max_len`` (1,024 bytes): the statement lifts it for itself, whatever
    the session's."""
    names = [f"CUSTOM_T{i:03d}" for i in range(300)]
    with db.begin() as conn:
        many = provider(conn, "many", inventory={"VCPU": 4}, traits=names)
    with db.engine.connect() as conn:
        if db.engine.dialect.name == "mysql":
            conn.exec_driver_sql("SET SESSION group_concat_max_len = 1024")
        rc_names = resolve_names(conn, (), (), every_class=True).rc_names
        for written in (False, True):
            rows = sm.fetch_summaries(conn, {many.id}, rc_names, written=written)
            assert rows.build()[many.uuid].traits == frozenset(names)
            assert len(next(iter(rows.trait_sets))) > 1024


def test_usage_counts(db: Database, trees: dict[str, Ref]) -> None:
    with db.begin() as conn:
        allocate(conn, "c-3", trees["cn"], "MEMORY_MB", 1000)
        allocate(conn, "c-4", trees["cn"], "CUSTOM_R16", 5)
    for written in (False, True):
        rows, _ = _fetch(db, {trees["cn"].id}, written)
        got = rows.build()[trees["cn"].uuid].resources
        assert got["MEMORY_MB"] == ResourceSummary(4096, 1000)
        assert got["CUSTOM_R16"] == ResourceSummary(96, 5)
        assert got["VCPU"] == ResourceSummary(8, 3)


def test_summary_statement_compiles_per_backend(db: Database) -> None:
    """Both forms of the providers' statement run on the backend (no rows)."""
    with db.engine.connect() as conn:
        for stmt in (sm.summary_keyed(True), sm.summary_keyed(False), sm._summary(0)):
            assert runner.driver_rows(conn, stmt, {"tree_ids": []}) == []
        for stmt in (sm.summary_inventories_of(), sm.summary_traits_of()):
            assert runner.driver_rows(conn, stmt, {"summary_ids": [-1]}) == []
        assert conn.execute(sa.select(sa.literal(1))).scalar() == 1


#: a provider name JSON must escape (quote, backslash, control characters, a line
#: separator JavaScript refuses) or that holds a plain text's separators, and 4-byte UTF-8
ODD_NAME = 'o"d\\d \x1e\x1f\x01\n\t\u2028;:, ü名😀'


def test_summary_rows_as_one_json_text_are_the_rows(
    db: Database, trees: dict[str, Ref], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a big statement's rows come as one JSON text (MySQL/MariaDB), the
    summaries' providers read that way are the rows they are as rows, in both forms:
    names JSON must escape or that hold the separators of a plain text, a parent and
    trait ids ``NULL``; a text cut short (``group_concat_max_len`` made tiny: MariaDB
    ends it with ``]`` after the cut) is read again as rows."""
    with db.engine.connect() as conn:
        if not dialects.rows_as_json(conn):
            pytest.skip("rows stay rows on this backend")
    with db.begin() as conn:
        odd = provider(conn, ODD_NAME, inventory={"VCPU": 1}, traits=["HW_Z"])
    roots = {trees["cn"].id, trees["huge"].id, odd.id}
    params: dict[str, Any] = {"tree_ids": sorted(roots)}
    stmts = [sm.summary_keyed(True), sm.summary_keyed(False), sm._summary(0)]

    def both(conn: sa.Connection) -> list[tuple[list[Any], list[Any]]]:
        return [
            (
                sorted(map(list, runner.json_rows(conn, st, params))),
                sorted(map(list, runner.driver_rows(conn, st, params))),
            )
            for st in stmts
        ]

    with db.engine.connect() as conn:
        for (got, rows), st in zip(both(conn), stmts, strict=True):
            assert got == rows and len(rows) == 5
            assert {r[2] for r in rows} >= {ODD_NAME, "cn-bare"}
            assert any(r[3] is None for r in rows)
            if st is not stmts[1]:  # the others end with the trait ids
                assert any(r[-1] is None for r in rows)
        for st in stmts:  # the text itself holds the rows (not read again as rows)
            ((_, text),) = runner.driver_rows(conn, runner._json_text(st), params)
            assert sorted(orjson.loads(text)) == sorted(
                map(list, runner.driver_rows(conn, st, params))
            )
        ((_, full),) = runner.driver_rows(conn, runner._json_text(stmts[0]), params)
    # cut in a row, and just after the second one (MariaDB ends both with "]", after
    # the separator in the second case: no JSON either way)
    second = full.index("],[", full.index("],[") + 1) + 1
    for tiny_len in (len(full[:second].encode()) - 5, len(full[:second].encode())):
        monkeypatch.setattr(dialects._mysql, "GROUP_CONCAT_MAX_LEN", tiny_len)
        tiny = Database(db.url)  # a fresh engine compiles the statements with that length
        try:
            with tiny.engine.connect() as short:
                for got, rows in both(short):
                    assert got == rows
                ((count, text),) = runner.driver_rows(short, runner._json_text(stmts[0]), params)
                assert count == 5 and not _json_of_rows(text, 5)  # it was cut
                rc_names = resolve_names(short, (), (), every_class=True).rc_names
                found = sm.fetch_summaries(short, roots, rc_names, written=False).build()
                assert found[odd.uuid].name == ODD_NAME and len(found) == 5
        finally:
            tiny.dispose()


def test_one_pass_capacities_as_text(db: Database, trees: dict[str, Ref]) -> None:
    """A whole-cloud answer's one pass over the inventories (:func:`ex.load_groups`
    ``summary_rows``) gives the rows it gives as rows, also where they come as one text
    (MySQL/MariaDB: capacities with a fraction, the 2**53 one, read back as the same
    doubles)."""
    with db.engine.connect() as conn:
        req = parse_candidates("resources=VCPU:1")
        names = resolve_names(conn, req.resource_class_names(), (), every_class=True)
        what, values = ex.group_statement(req.groups[0], names, room=False, summary=True)
        stmt = ex._stmt(what, None)
        params = {**values, "sharing_ids": [], "sharing_exempt": []}
        rows = sorted(map(tuple, runner.driver_rows(conn, stmt, params)))
        capacities = {float(r[3]) for r in rows}
        assert {1.5, 0.999999, INT_MAX * 5e6} <= capacities
        if not dialects.ids_as_text(conn):
            return
        assert runner.numbers(stmt)
        (got,) = runner._text_rows(conn, [(stmt, params)])
        assert sorted(got) == [(*r[:3], float(r[3]), *r[4:]) for r in rows]
        # doubles as the driver's rows hold them, whole numbers as ints
        assert {tuple(type(v) for v in r) for r in got} == {(int, int, int, float, int, int)}


def _json_of_rows(text: str | None, count: int) -> bool:
    """Whether ``text`` is a JSON array of ``count`` rows."""
    try:
        return text is not None and len(orjson.loads(text)) == count
    except orjson.JSONDecodeError:
        return False
