"""Golden SQL: the read path's builders compiled for SQLite, PostgreSQL and MySQL
without a database. The forbidden-trait clause must be a correlated ``NOT EXISTS`` in
all three; traits, aggregates and capacity of a group live in one statement."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect

from rpquery.insight import _why_sql as why_sql
from rpquery.read import _clauses as clauses
from rpquery.read.candidates import _sql as q
from rpquery.read.candidates import _summary_sql as qs
from rpquery.read.providers import providers_stmt
from rpquery.read.request import parse_candidates, parse_providers
from rpquery.store import dialects
from rpquery.store.tables import resource_providers

DIALECTS = {
    "sqlite": sqlite.dialect(),
    "postgresql": postgresql.dialect(),
    "mysql": mysql.dialect(),
}
NAMES = q.Names(
    rc_ids={"VCPU": 0, "MEMORY_MB": 1, "DISK_GB": 2, "SRIOV_NET_VF": 3},
    trait_ids={"CUSTOM_GPU": 100, "HW_CPU_X86_AVX2": 101, q.SHARING_TRAIT: 102},
)
AGG = "11111111-2222-4333-8444-555555555555"


def sql(stmt: sa.ClauseElement, dialect: Dialect) -> str:
    text = str(stmt.compile(dialect=dialect, compile_kwargs={"render_postcompile": True}))
    return " ".join(text.split())


@pytest.fixture(params=sorted(DIALECTS))
def dialect(request: pytest.FixtureRequest) -> Dialect:
    return DIALECTS[request.param]


def test_forbidden_trait_is_correlated_not_exists(dialect: Dialect) -> None:
    rp = resource_providers.alias("rp")
    text = sql(sa.select(rp.c.id).where(clauses.lacks_any_trait(rp.c.id, [100])), dialect)
    assert re.search(
        r"WHERE NOT \(EXISTS \(SELECT 1 FROM resource_provider_traits AS rpt "
        r"WHERE rpt.resource_provider_id = rp.id AND rpt.trait_id IN \(.+?\)\)\)",
        text,
    ), text


USAGE_JOIN = (
    "LEFT OUTER JOIN rpq_provider_usages AS pu ON pu.resource_provider_id = "
    "inv.resource_provider_id AND pu.resource_class_id = inv.resource_class_id"
)


def test_group_statement_is_one_select(dialect: Dialect) -> None:
    req = parse_candidates(f"resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU&member_of=!{AGG}")
    text = sql(q.group_rows_stmt(req.groups[0], NAMES, [1, 2], [7]), dialect)
    assert text.count("NOT (EXISTS (SELECT 1 FROM resource_provider_traits") == 1
    # a forbidden aggregate: one NOT EXISTS for the provider, one for its root, each
    # correlated by a plain equality (an anti-join a planner can hash)
    assert text.count("NOT (EXISTS (SELECT 1 FROM resource_provider_aggregates") == 2
    assert "AND rpa.resource_provider_id = rp.id))" in text
    assert "AND rpa.resource_provider_id = rp.root_provider_id))" in text
    # usage: the stored row of each inventory (rpq0007), never a sum over allocations
    assert USAGE_JOIN in text, text
    assert "allocations" not in text and "GROUP BY" not in text
    assert "rp.root_provider_id IN (" in text and "rp.id IN (" in text


def test_sharing_providers_exempt_from_their_roots_forbidden_aggregate(dialect: Dialect) -> None:
    """The unsuffixed group with sharing providers in play: the root's forbidden
    aggregate spares the bound sharing providers inside the same anti-join."""
    req = parse_candidates(f"resources=DISK_GB:10&member_of=!{AGG}")
    exempt = clauses.ids_param("sharing_ids")
    stmt = q.group_rows_stmt(req.groups[0], NAMES, None, (), exempt)
    text = sql(stmt.params(sharing_ids=[7, 9]), dialect)
    assert text.count("NOT (EXISTS (SELECT 1 FROM resource_provider_aggregates") == 2
    assert "AND rpa.resource_provider_id = rp.id))" in text
    root = r"rpa\.resource_provider_id = rp\.root_provider_id AND \(?rp\.id NOT IN"
    assert re.search(root, text), text
    assert "OR rp.id" not in text, text  # not beside it: PostgreSQL would run a subplan


def test_member_of_on_provider_or_root_is_an_uncorrelated_in(dialect: Dialect) -> None:
    req = parse_candidates(f"resources=VCPU:1&member_of={AGG}")
    text = sql(q.group_rows_stmt(req.groups[0], NAMES), dialect).replace("INNER JOIN", "JOIN")
    members = (
        "(SELECT rpm.resource_provider_id FROM resource_provider_aggregates AS rpm "
        "JOIN placement_aggregates AS pam ON pam.id = rpm.aggregate_id WHERE pam.uuid IN ("
    )
    assert f"rp.id IN {members}" in text and f"rp.root_provider_id IN {members}" in text, text


AGG2 = "11111111-2222-4333-8444-666666666666"


def test_repeated_member_of_is_not_split_between_provider_and_root(dialect: Dialect) -> None:
    """Unsuffixed group: the provider in every term, or its root in every term."""
    req = parse_candidates(f"resources=VCPU:1&member_of={AGG}&member_of=in:{AGG},{AGG2}")
    text = sql(q.group_rows_stmt(req.groups[0], NAMES), dialect).replace("INNER JOIN", "JOIN")
    members = re.compile(
        r"\(SELECT rpm\.resource_provider_id FROM resource_provider_aggregates AS rpm "
        r"JOIN placement_aggregates AS pam ON pam\.id = rpm\.aggregate_id "
        r"WHERE pam\.uuid IN \(.*?\)\)"
    )
    assert len(members.findall(text)) == 4, text
    assert (
        "(rp.id IN M AND rp.id IN M OR rp.root_provider_id IN M AND rp.root_provider_id IN M)"
        in members.sub("M", text)
    ), text


@pytest.mark.parametrize(
    "query", [f"resources_G=VCPU:1&member_of_G={AGG}&member_of_G=!{AGG2}", "provider list"]
)
def test_own_aggregates_in_suffixed_groups_and_provider_lists(
    dialect: Dialect, query: str
) -> None:
    """Suffixed groups and provider lists: the provider's own aggregates, no root."""
    if query == "provider list":
        req = parse_providers(f"member_of={AGG}&member_of=!{AGG2}")
        text = sql(providers_stmt(req, NAMES), dialect)
    else:
        text = sql(q.group_rows_stmt(parse_candidates(query).groups[0], NAMES), dialect)
    assert "root_provider_id IN (SELECT" not in text
    assert "rpa.resource_provider_id = rp.root_provider_id" not in text
    assert text.count("EXISTS (SELECT 1 FROM resource_provider_aggregates") == 2
    assert "NOT (EXISTS (SELECT 1 FROM resource_provider_aggregates" in text


def test_granular_required_traits_are_exists(dialect: Dialect) -> None:
    req = parse_candidates("resources_G=VCPU:1&required_G=in:HW_CPU_X86_AVX2,CUSTOM_GPU")
    text = sql(q.group_rows_stmt(req.groups[0], NAMES), dialect)
    assert re.search(r"AND \(EXISTS \(SELECT 1 FROM resource_provider_traits AS rpt", text)
    assert re.search(r"rpt.trait_id IN \(\S+, \S+\)\)", text), text


def test_capacity_expression(dialect: Dialect) -> None:
    req = parse_candidates("resources=VCPU:2")
    text = sql(q.group_rows_stmt(req.groups[0], NAMES), dialect)
    # MySQL/MariaDB store the ratio as a 32-bit FLOAT (0.7 -> 0.699999988): capacity is
    # computed from its text form, the ratio as written (docs/design.md#capacity)
    ratio = (
        "CAST(CAST(inv.allocation_ratio AS CHAR) AS DOUBLE)"
        if dialect.name == "mysql"
        else "inv.allocation_ratio"
    )
    assert f"(inv.total - inv.reserved) * {ratio}" in text, text
    assert "inv.min_unit <=" in text and "inv.max_unit >=" in text


def test_roots_statement_random_limit(dialect: Dialect) -> None:
    stmt = q.roots_stmt([101], [100], limit=10, randomize=True)
    text = sql(stmt, dialect)
    assert ("rand()" if dialect.name == "mysql" else "random()") in text
    assert "LIMIT" in text and "NOT (EXISTS" in text


def test_roots_statement_could_serve_is_correlated(dialect: Dialect) -> None:
    req = parse_candidates("resources=DISK_GB:10&required=!CUSTOM_GPU")
    root = resource_providers.alias("root")
    serve = [q.could_serve(req.groups[0], "DISK_GB", 10, NAMES, root.c.id)]
    text = sql(q.roots_stmt([], [], (), serve, limit=20, root=root), dialect)
    # a per-row filter on every backend (no semi-join, no hashed subplan over all trees)
    assert "(1 = 0 OR (EXISTS (SELECT" in text
    assert "np.root_provider_id BETWEEN root.id AND root.id" in text
    assert "FROM resource_providers AS root WHERE" in text and text.count("AS root") == 1
    assert "rpt.resource_provider_id = np.id" in text


def test_sharing_statement(dialect: Dialect) -> None:
    text = sql(q.sharing_stmt(NAMES, [2]), dialect)
    assert "SELECT DISTINCT st.resource_provider_id AS sharing_id" in text
    assert (
        "JOIN resource_provider_aggregates AS tagg ON tagg.aggregate_id = sagg.aggregate_id"
        in text
    )


def test_names_and_sharing_are_one_statement(dialect: Dialect) -> None:
    """The first statement of a candidates request: sharing pairs (the trait and the
    classes looked up by name, no join of their tables), every class, the request's
    traits, the roots' count when asked for (``count_roots``), and on PostgreSQL the
    session's ``jit = off`` in a branch with no row."""
    settings = dialects.read_settings(dialect.name)
    fenced = dialects.backend(dialect.name).fences_sharing
    stmt = q.names_sharing_of(
        settings=None if settings is None else sa.literal_column(settings, sa.String),
        fenced=fenced,
    )
    values = {"trait_names": ["CUSTOM_GPU"], "sharing_rc_names": ["DISK_GB"], "count_roots": 0}
    text = sql(stmt.params(sharing_trait_name=q.SHARING_TRAIT, **values), dialect)
    if fenced:  # PostgreSQL: the sharing providers planned apart
        assert text.startswith(
            "SELECT DISTINCT NULL AS name, s.id AS id, tp.root_provider_id AS root, "
            "s.rc AS rc FROM (SELECT st.resource_provider_id AS id, "
            "sinv.resource_class_id AS rc FROM "
        ), text
        assert (
            " LIMIT ALL OFFSET 0) AS s JOIN resource_provider_aggregates AS sagg "
            "ON sagg.resource_provider_id = s.id JOIN" in text
        )
    else:
        assert text.startswith(
            "SELECT DISTINCT NULL AS name, st.resource_provider_id AS id, "
            "tp.root_provider_id AS root, sinv.resource_class_id AS rc FROM "
        ), text
    assert fenced == (dialect.name == "postgresql")
    assert "WHERE st.trait_id = (SELECT sht.id FROM traits AS sht WHERE sht.name = " in text
    # the names as one array on PostgreSQL: one text for any request, whose plan the
    # server keeps (dialects.in_name_list, dialects.execute_prepared)
    names_in = " = ANY (CAST(" if dialect.name == "postgresql" else " IN ("
    assert (
        "AND (SELECT src.name FROM resource_classes AS src "
        f"WHERE src.id = sinv.resource_class_id){names_in}" in text
    )
    assert " UNION ALL SELECT resource_classes.name AS name, resource_classes.id AS id" in text
    assert f"FROM traits WHERE traits.name{names_in}" in text
    # the count's condition a constant the planners fold (no scan when it is false)
    assert (
        " UNION ALL SELECT NULL AS name, count(*) AS id, NULL AS root, NULL AS rc "
        "FROM resource_providers WHERE resource_providers.parent_provider_id IS NULL AND "
    ) in text
    has_settings = text.endswith("WHERE set_config('jit', 'off', false) IS NULL")
    assert has_settings == (dialect.name == "postgresql"), text
    assert text.count(" UNION ALL ") == (4 if has_settings else 3)


TREES_CLAUSE = {
    # one untyped array literal: the planner sees the values (no bind cast)
    "postgresql": "WHERE rp.root_provider_id = ANY (%(tree_ids)s::INTEGER[])",
    "sqlite": "WHERE rp.root_provider_id IN (SELECT value FROM json_each(?))",
    "mysql": "WHERE rp.root_provider_id IN (1, 2)",
}


TRAIT_IDS = {
    # a provider's traits as one text of ids, no join with traits (names come once per id)
    "postgresql": "(SELECT string_agg(CAST(rpt.trait_id AS TEXT), ',') AS concat_agg_1 "
    "FROM resource_provider_traits AS rpt WHERE rpt.resource_provider_id = rp.id) AS trait_ids",
    "sqlite": "(SELECT group_concat(rpt.trait_id) AS concat_agg_1 "
    "FROM resource_provider_traits AS rpt WHERE rpt.resource_provider_id = rp.id) AS trait_ids",
    "mysql": "(SELECT GROUP_CONCAT(rpt.trait_id) AS concat_agg_1 "
    "FROM resource_provider_traits AS rpt WHERE rpt.resource_provider_id = rp.id) AS trait_ids",
}
#: capacity truncated toward zero (Python's int()), never rounded by a cast
TRUNCATED = {
    "postgresql": "CASE WHEN abs((inv.total - inv.reserved) * inv.allocation_ratio) < "
    "9007199254740992 THEN CAST(trunc((inv.total - inv.reserved) * inv.allocation_ratio) "
    "AS BIGINT) END",
    "sqlite": "CAST((inv.total - inv.reserved) * inv.allocation_ratio AS INTEGER)",
    "mysql": "CAST(TRUNCATE((inv.total - inv.reserved) * CAST(CAST(inv.allocation_ratio AS "
    "CHAR) AS DOUBLE), 0) AS SIGNED)",
}


def test_summary_statements_only_for_returned_trees(dialect: Dialect) -> None:
    name = dialect.name
    text = sql(qs.summary_stmt("tree_ids").params(tree_ids=[1, 2]), dialect)
    # one row per provider: no ORDER BY (sorted by uuid in Python), no join, no GROUP BY
    text = text.replace("/*+ SET_VAR(group_concat_max_len = 16777216) */ ", "")  # MySQL 8
    assert text.startswith(
        "SELECT rp.id, rp.uuid, rp.name, rp.parent_provider_id, rp.root_provider_id, (SELECT"
    ), text
    assert text.endswith(TREES_CLAUSE[name]), text
    assert TRAIT_IDS[name] in text
    assert "GROUP BY" not in text and "JOIN" not in text and "inventories" not in text
    inventories = sql(qs.summary_inventories_stmt("tree_ids").params(tree_ids=[1, 2]), dialect)
    assert inventories.startswith("SELECT inv.resource_provider_id, inv.resource_class_id, "), (
        inventories
    )
    assert inventories.endswith(TREES_CLAUSE[name]), inventories
    assert "resource_classes" not in inventories  # classes come back as ids
    # usage: the stored row of each returned inventory, never a sum over allocations
    assert USAGE_JOIN in inventories and "allocations" not in inventories
    names = sql(qs.summary_trait_names_stmt([7, 3]), dialect)
    assert names.startswith("SELECT t.id, t.name FROM traits AS t WHERE t.id IN ("), names


def test_summary_resources_written_by_the_database(dialect: Dialect) -> None:
    name = dialect.name
    text = sql(qs.summary_stmt("tree_ids", resources=True).params(tree_ids=[1, 2]), dialect)
    assert text.endswith(TREES_CLAUSE[name]), text
    assert TRAIT_IDS[name] in text
    # one correlated subquery per provider: its classes by name, capacity truncated,
    # '{}' without inventory, NULL (read as rows instead) from 2**53 less a margin on,
    # tested on the stored product (the ratio as written only in the capacity written)
    assert TRUNCATED[name] in text
    assert "THEN '{}' WHEN (max(abs((inv.total - inv.reserved) * inv.allocation_ratio)) " in text
    assert f"< {2**53 - 2**34}) THEN" in text
    if name == "mysql":  # the ratio's text form only in the capacity written
        assert text.count("CAST(CAST(inv.allocation_ratio AS CHAR) AS DOUBLE)") == 1, text
    assert "JOIN resource_classes AS rc ON rc.id = inv.resource_class_id" in text
    assert USAGE_JOIN in text and "WHERE inv.resource_provider_id = rp.id) AS resources" in text
    # as fetch_summaries sends it: the classes' names bound, quoted, no join per
    # inventory; a class not bound looked up by a subquery
    values = {"tree_ids": [1, 2], "summary_rc0": 0, "summary_rc_name0": '"VCPU"'}
    named = sql(qs.summary_stmt("tree_ids", resources=True, named=1).params(values), dialect)
    assert "resource_classes AS rc ON" not in named and USAGE_JOIN in named
    assert named.count("CASE inv.resource_class_id WHEN ") == 1, named
    assert named.count(" THEN ") == text.count(" THEN ") + 1  # the one class bound
    assert "FROM resource_classes AS rcn WHERE rcn.id = inv.resource_class_id" in named
    if name == "mysql":  # GROUP_CONCAT never cut at group_concat_max_len
        assert text.startswith(
            "SELECT /*+ SET_VAR(group_concat_max_len = 16777216) */ rp.id, rp.uuid"
        ), text
        maria = mysql.dialect()
        maria.is_mariadb = True
        assert sql(qs.summary_stmt("tree_ids").params(tree_ids=[1, 2]), maria).startswith(
            "SET STATEMENT group_concat_max_len = 16777216 FOR SELECT rp.id"
        )
    of = sql(qs.summary_inventories_of("summary_ids").params(summary_ids=[5]), dialect)
    assert USAGE_JOIN in of and "inv.resource_provider_id" in of.split("WHERE")[1]


def test_provider_list_statement(dialect: Dialect) -> None:
    req = parse_providers(f"resources=VCPU:1&required=HW_CPU_X86_AVX2,!CUSTOM_GPU&member_of={AGG}")
    text = sql(providers_stmt(req, NAMES), dialect)
    assert text.count("NOT (EXISTS (SELECT 1 FROM resource_provider_traits") == 1
    assert "rpa.resource_provider_id = rp.id" in text
    assert "ORDER BY rp.id" in text


WHY_QUERY = "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU"


def test_why_counted_statement_joins_inventories_then_trait_sets(dialect: Dialect) -> None:
    g = parse_candidates(WHY_QUERY).groups[0]
    text = sql(why_sql.counted_stmt(g, NAMES, 3, dialect.name), dialect)
    # inventories first (the outer join keeps that order), the forbidden trait as one
    # uncorrelated set per statement, not an EXISTS per row
    assert "FROM inventories AS inv LEFT OUTER JOIN resource_providers AS rp" in text, text
    assert re.search(
        r"LEFT OUTER JOIN \(SELECT DISTINCT t0_rpt.resource_provider_id AS "
        r"resource_provider_id FROM resource_provider_traits AS t0_rpt WHERE "
        r"t0_rpt.trait_id IN \(.+?\)\) AS t0 ON t0.resource_provider_id = "
        r"inv.resource_provider_id",
        text,
    ), text
    assert "WHEN (t0.resource_provider_id IS NOT NULL)" in text
    assert "EXISTS (SELECT 1 FROM resource_provider_traits AS rpt WHERE " in text  # bare hosts
    windowed = "ROW_NUMBER() OVER (PARTITION BY h.verdict ORDER BY h.k)"
    assert (windowed.lower() in text.lower()) == (dialect.name != "mysql"), text
    assert not text.startswith("SET STATEMENT")  # MySQL proper: no such statement


def test_why_counted_statement_on_mariadb_groups_with_hash_joins() -> None:
    g = parse_candidates(WHY_QUERY).groups[0]
    text = sql(why_sql.counted_stmt(g, NAMES, 3, "mysql"), mysql.dialect(is_mariadb=True))
    assert text.startswith(
        "SET STATEMENT join_cache_level = 4, join_buffer_size = 8388608 FOR WITH r AS ("
    ), text
    assert "GROUP_CONCAT(h.k ORDER BY h.k SEPARATOR ',' LIMIT 3)" in text
    assert text.endswith("GROUP BY h.verdict, CASE WHEN (h.verdict = %s) THEN h.k END"), text
    assert " OVER " not in text


def test_lean_and_grouped_group_statements(dialect: Dialect) -> None:
    """Without room columns: provider, root, class; grouped: one row per provider with
    the mask of its classes (bits of the shape written in, the class ids bound)."""
    import dataclasses

    from rpquery.read._clauses import Binds

    req = parse_candidates("resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU")
    shape, values = q.group_shape(req.groups[0], NAMES)
    lean = dataclasses.replace(shape, room=False)
    text = sql(q.group_rows_of(lean, Binds(values)), dialect)
    assert text.startswith(
        "SELECT rp.id, rp.root_provider_id, inv.resource_class_id FROM inventories AS inv"
    ), text
    grouped = dataclasses.replace(lean, grouped=True)
    text = sql(q.group_rows_of(grouped, Binds(values)), dialect)
    integer = "SIGNED INTEGER" if dialect.name == "mysql" else "INTEGER"
    assert re.match(
        r"SELECT rp.id, rp.root_provider_id, CAST\(sum\(CASE WHEN \(inv.resource_class_id = "
        r"\S+\) THEN 1 WHEN \(inv.resource_class_id = \S+\) THEN 2 ELSE 0 END\) AS "
        rf"{integer}\) AS classes FROM inventories AS inv ",
        text,
    ), text
    assert text.endswith(" GROUP BY rp.id, rp.root_provider_id"), text
    assert "capacity" not in text and "max_unit AS" not in text


def test_summary_pass_reads_forbidden_trait_holders_once(dialect: Dialect) -> None:
    """A whole-cloud answer's one pass (``summary``: every inventory row with ``fits``)
    tests forbidden traits with a ``NOT EXISTS`` against their holders read once (a
    ``DISTINCT`` derived table) where the backend materialises it, not a correlated
    lookup per row; PostgreSQL keeps the correlated form, as the group's own statement
    does everywhere. Forbidden traits stay ``NOT EXISTS`` clauses on every backend."""
    import dataclasses

    from rpquery.read._clauses import Binds

    req = parse_candidates("resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU")
    shape, values = q.group_shape(req.groups[0], NAMES)
    summary = dataclasses.replace(shape, room=False, summary=True)
    bound = q.group_rows_of(summary, Binds()).compile(dialect=dialect)  # the cached texts'
    once = (
        r"AND NOT \(EXISTS \(SELECT 1 FROM \(SELECT DISTINCT rpt.resource_provider_id AS id "
        r"FROM resource_provider_traits AS rpt WHERE rpt.trait_id IN \(.+?\)\) AS holders "
        r"WHERE holders.id = rp.id\)\)\) THEN 1"
    )
    correlated = (
        r"AND NOT \(EXISTS \(SELECT 1 FROM resource_provider_traits AS rpt WHERE "
        r"rpt.resource_provider_id = rp.id AND rpt.trait_id IN \(.+?\)\)\)\) THEN 1"
    )
    for text in (
        sql(q.group_rows_of(summary, Binds(values)), dialect),
        " ".join(str(bound).split()),
    ):
        assert re.search(correlated if dialect.name == "postgresql" else once, text), text
        assert " NOT IN " not in text, text
    lean = dataclasses.replace(shape, room=False)
    assert "NOT (EXISTS (SELECT 1 FROM resource_provider_traits" in sql(
        q.group_rows_of(lean, Binds(values)), dialect
    )


def test_a_batch_reads_its_own_sharing_pairs(dialect: Dialect) -> None:
    """A ``limit``'s walk on SQLite: the names statement reads the classes of the pairs,
    not the pairs; each batch reads its trees' pairs, the aggregates compared without
    their index (SQLite otherwise walks every member of a sharing aggregate)."""
    names = q.names_sharing_of(classes_only=True)
    values = {"trait_names": ["CUSTOM_GPU"], "sharing_rc_names": ["DISK_GB"], "count_roots": 0}
    text = sql(names.params(sharing_trait_name=q.SHARING_TRAIT, **values), dialect)
    assert text.startswith("SELECT DISTINCT NULL AS name, CAST(NULL AS "), text
    assert "tagg" not in text and "AS tp" not in text
    assert "JOIN resource_provider_aggregates AS sagg ON sagg.resource_provider_id = " in text
    binds = clauses.Binds({"sharing_trait": 5, "sharing_rcs": [2], "sharing_roots": [1, 7]})
    text = sql(q.batch_sharing_of(binds), dialect)
    assert "AS tagg ON tagg.aggregate_id + 0 = sagg.aggregate_id + 0 " in text
    assert " AND tp.root_provider_id IN (" in text and text.endswith(")"), text
