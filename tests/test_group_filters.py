"""The per-group filters are declared once (issue 36, item 2): ``GROUP_FILTERS`` in
``rpquery/read/_filters.py`` names each filter's request field, shape count, clauses and
rejection reason, and every reader iterates it.

Without a database: every filter field of ``RequestGroup`` has its entry (and a control: a
field left out of the table is reported); no module but the request and the table reads
a filter field by name (and a control: such a read is reported); the shape, the clauses
and the rejection reasons of a group with every filter come from the table, in its order.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from rpquery.insight import _why_sql as w
from rpquery.read import _filters as flt
from rpquery.read.candidates import _batches as bt
from rpquery.read.request import RequestGroup
from rpquery.store.tables import resource_providers

ROOT = Path(__file__).resolve().parents[1]
#: The fields of a request group that are not filters.
NOT_FILTERS = {"suffix", "resources"}
#: The modules allowed to read a filter field by name: the request and the table.
DECLARING = {"rpquery/read/request.py", "rpquery/read/_filters.py"}
AGG = "11111111-2222-4333-8444-555555555551"
TREE = "11111111-2222-4333-8444-555555555552"
NAMES = flt.Names(rc_ids={"VCPU": 0}, trait_ids={"CUSTOM_A": 1, "CUSTOM_B": 2, "CUSTOM_C": 3})


def every_filter(suffix: str = "1") -> RequestGroup:
    return RequestGroup(
        suffix=suffix,
        resources={"VCPU": 1},
        required=(frozenset({"CUSTOM_A"}), frozenset({"CUSTOM_B", "CUSTOM_C"})),
        forbidden=frozenset({"CUSTOM_C"}),
        member_of=(frozenset({AGG}),),
        forbidden_aggs=frozenset({TREE}),
        in_tree=TREE,
    )


def undeclared(fields: Iterable[str], table: Sequence[flt.GroupFilter]) -> list[str]:
    """Filter fields of a request group with no entry in ``table``, and entries reading
    no field of it."""
    declared = [f.field for f in table]
    wanted = set(fields) - NOT_FILTERS
    return sorted(wanted.symmetric_difference(declared)) + sorted(
        {d for d in declared if declared.count(d) > 1}
    )


def test_every_filter_field_of_a_request_group_is_in_the_table() -> None:
    fields = [f.name for f in dataclasses.fields(RequestGroup)]
    assert undeclared(fields, flt.GROUP_FILTERS) == []


def test_a_filter_missing_from_the_table_is_caught() -> None:
    fields = [f.name for f in dataclasses.fields(RequestGroup)]
    assert undeclared(fields, flt.GROUP_FILTERS[:-1]) == [flt.GROUP_FILTERS[-1].field]
    assert undeclared([*fields, "in_subtree"], flt.GROUP_FILTERS) == ["in_subtree"]
    twice = (*flt.GROUP_FILTERS, flt.MEMBER_OF)
    assert undeclared(fields, twice) == ["member_of"]


def reads_by_name(source: str) -> list[str]:
    """Reads of a request group's filter field by its name: ``x.member_of``,
    ``x.forbidden_aggs``, ``x.in_tree`` on anything, ``g.required`` / ``g.forbidden``
    on a group's usual names (a roots shape has its own ``required``), and
    ``getattr(x, "<field>")``."""
    fields = {f.field for f in flt.GROUP_FILTERS}
    shared = {"required", "forbidden"}  # also CandidatesRequest / RootsShape words
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in fields:
            on_group = isinstance(node.value, ast.Name) and node.value.id in ("g", "group")
            if node.attr not in shared or on_group:
                found.append(f"{node.lineno}: .{node.attr}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in fields
        ):
            found.append(f"{node.lineno}: getattr {node.args[1].value}")
    return found


def test_no_reader_names_a_filter_field() -> None:
    found = {}
    for path in sorted((ROOT / "rpquery").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in DECLARING and (hits := reads_by_name(path.read_text())):
            found[rel] = hits
    assert found == {}


def test_the_check_catches_a_filter_read_by_name() -> None:
    source = (
        "def f(g, shape):\n"
        "    a = g.member_of\n"
        "    b = shape.required\n"  # a roots shape's count: not a group's field
        "    return a, b, g.forbidden, getattr(g, 'in_tree')\n"
    )
    assert reads_by_name(source) == ["2: .member_of", "4: .forbidden", "4: getattr in_tree"]
    # a reader that iterates the table (``f.of(g)``, ``f.given(g)``) names none
    assert reads_by_name((ROOT / "rpquery/read/candidates/_batches.py").read_text()) == []


def test_the_shape_and_values_come_from_the_table() -> None:
    g = every_filter()
    shape, values = flt.filter_shape(g, NAMES, "g_")
    assert shape.counts == tuple(len(f.bind(g, NAMES)) for f in flt.GROUP_FILTERS)
    assert shape.counts == (1, 2, 1, 1, 1)
    names = [n for f in flt.GROUP_FILTERS for n in f.names(shape)]
    assert list(values) == names
    assert names == [
        "g_forbidden",
        "g_required0",
        "g_required1",
        "g_member_of0",
        "g_forbidden_aggs",
        "g_in_tree",
    ]
    # unknown forbidden traits drop out: no value, no clause
    unknown = dataclasses.replace(g, forbidden=frozenset({"CUSTOM_Z"}))
    assert flt.filter_shape(unknown, NAMES, "g_")[0].count(flt.FORBIDDEN_TRAITS) == 0


def _sql(clause: sa.ColumnElement[bool]) -> str:
    compiled = clause.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True})
    return " ".join(str(compiled).split())


def test_the_clauses_are_the_entries_in_table_order() -> None:
    g = every_filter()
    rp = resource_providers.alias("rp")
    got = [_sql(c) for c in flt.provider_filters(g, NAMES, rp, with_required=True)]
    _, values = flt.filter_shape(g, NAMES, "")
    at = flt.Where(rp)
    want = []
    for f in flt.GROUP_FILTERS:
        shape, _ = flt.filter_shape(g, NAMES, "")
        want += [_sql(c) for c in f.clauses([values[n] for n in f.names(shape)], at)]
    assert got == want
    assert len(got) == 6  # forbidden, two required sets, member_of, forbidden_aggs, in_tree
    # the tree-wide filter (required) is no clause of the unsuffixed group's providers
    unsuffixed = dataclasses.replace(g, suffix="")
    assert len(flt.provider_filters(unsuffixed, NAMES, rp, with_required=False)) == 4


def test_every_group_filter_reason_comes_from_the_table() -> None:
    told = [f.reason for f in flt.TOLD_FILTERS]
    assert list(w.REASONS[: len(told)]) == told
    assert sorted(f.told for f in flt.GROUP_FILTERS) == list(range(len(flt.GROUP_FILTERS)))
    stages = w.filter_stages(every_filter(), NAMES, resource_providers.alias("rp"))
    codes = [s.code for s in stages]
    # one stage per filter in told order, one per set of a per-set filter
    want = [f.reason for f in flt.TOLD_FILTERS for _ in range(2 if f.per_set else 1)]
    assert codes == want
    assert all(s.of is not None and s.of.reason == s.code for s in stages)
    unsuffixed = w.filter_stages(every_filter(""), NAMES, resource_providers.alias("rp"))
    assert flt.TREE_WIDE.reason not in [s.code for s in unsuffixed]


def test_sharing_rules_are_read_from_the_table() -> None:
    g = every_filter("")
    rules = {f.sharing: f.field for f in flt.GROUP_FILTERS if f.sharing}
    assert rules == {flt.OWN: "member_of", flt.ANCHOR: "forbidden_aggs", flt.LOCAL: "in_tree"}
    absent = {"member_of": (), "forbidden_aggs": frozenset(), "in_tree": None}
    for rule, field in rules.items():
        assert flt.ruled(g, rule) == getattr(g, field)
        assert flt.ruled(dataclasses.replace(g, **{field: absent[field]}), rule) is None
    assert w.splits_sharing(g, [7])
    traits_only = RequestGroup(resources={"VCPU": 1}, forbidden=frozenset({"CUSTOM_A"}))
    assert not w.splits_sharing(traits_only, [7])
    other = w.other_tree_clauses(g, NAMES, resource_providers.alias("rp"))
    assert list(other) == [f.reason for f in flt.TOLD_FILTERS if f.sharing]


def test_could_serve_tests_and_shared_rows_are_keyed_by_the_table() -> None:
    g = every_filter()
    assert bt.filters_key(g) == (True, *(getattr(g, f.field) for f in flt.GROUP_FILTERS))
    fewer = dataclasses.replace(g, member_of=())
    # the tests' order: by how many of each filter a group gives, in table order
    items = [((bt.filters_key(x), "VCPU", 1), x) for x in (g, fewer)]
    assert [x for _, x in sorted(items, key=bt._test_order)] == [fewer, g]
