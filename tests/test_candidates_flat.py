"""Allocation candidates on flat compute nodes (single provider per tree), on every
backend: capacity, usage, forbidden and required traits, aggregates, limit, policies.

Modelled on Placement's ``test_allocation_candidates.py``: providers that must appear
are named ``incl_*``, providers that must not are ``excl_*``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement

from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.read.candidates import (
    AllocationCandidates,
    allocation_candidates,
    candidate_statements,
)
from rpquery.read.providers import list_providers
from rpquery.read.request import CandidatesRequest, RequestGroup
from rpquery.store.tables import resource_providers
from tests.factories import allocate, provider, trait_id

AGG_A = "aaaaaaaa-0000-4000-8000-000000000001"
AGG_B = "bbbbbbbb-0000-4000-8000-000000000002"
COMPUTE = {"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100}


def names_of(result: AllocationCandidates) -> set[str]:
    """Names of the providers used by any allocation request."""
    by_uuid = {u: s.name for u, s in result.provider_summaries.items()}
    return {by_uuid[u] for ar in result.allocation_requests for u in ar.allocations}


@pytest.fixture
def flat(db: Database) -> Database:
    with db.begin() as conn:
        provider(conn, "incl_cn1", inventory=COMPUTE, aggregates=[AGG_A])
        provider(conn, "incl_cn2", inventory=COMPUTE, traits=["HW_CPU_X86_AVX2"])
        busy = provider(conn, "excl_busy", inventory=COMPUTE)
        allocate(conn, "c-busy", busy, "VCPU", 8)
        provider(conn, "excl_gpu", inventory=COMPUTE, traits=["CUSTOM_GPU"], aggregates=[AGG_B])
        provider(conn, "excl_small", inventory={"VCPU": 8, "MEMORY_MB": 256})
        provider(
            conn, "excl_step", inventory={"VCPU": {"total": 8, "step_size": 2}, "MEMORY_MB": 4096}
        )
    return db


def test_forbidden_trait_excludes_provider(flat: Database) -> None:
    got = allocation_candidates(flat, "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU")
    assert names_of(got) == {"incl_cn1", "incl_cn2"}


def test_capacity_usage_and_step(flat: Database) -> None:
    got = allocation_candidates(flat, "resources=VCPU:1,MEMORY_MB:512")
    assert names_of(got) == {"incl_cn1", "incl_cn2", "excl_gpu"}
    two = allocation_candidates(flat, "resources=VCPU:2,MEMORY_MB:512")
    assert "excl_step" in names_of(two)


def test_required_trait_and_any_of(flat: Database) -> None:
    got = allocation_candidates(flat, "resources=VCPU:1&required=HW_CPU_X86_AVX2")
    assert names_of(got) == {"incl_cn2"}
    anyof = allocation_candidates(flat, "resources=VCPU:1&required=in:HW_CPU_X86_AVX2,CUSTOM_GPU")
    assert names_of(anyof) == {"incl_cn2", "excl_gpu"}


def test_member_of_and_forbidden_aggregate(flat: Database) -> None:
    got = allocation_candidates(flat, f"resources=VCPU:1&member_of=in:{AGG_A},{AGG_B}")
    assert names_of(got) == {"incl_cn1", "excl_gpu"}
    got = allocation_candidates(flat, f"resources=VCPU:1,MEMORY_MB:512&member_of=!{AGG_B}")
    assert names_of(got) == {"incl_cn1", "incl_cn2"}


def test_limit_and_summaries_only_for_returned(flat: Database) -> None:
    got = allocation_candidates(flat, "resources=VCPU:1,MEMORY_MB:512&limit=1")
    assert len(got.allocation_requests) == 1
    assert set(got.provider_summaries) == set(got.allocation_requests[0].allocations)
    body = got.to_placement()
    (summary,) = body["provider_summaries"].values()
    assert summary["resources"]["VCPU"]["capacity"] == 8
    assert set(body["allocation_requests"][0]) == {"allocations", "mappings"}


def test_summary_reports_usage(flat: Database) -> None:
    got = allocation_candidates(flat, "resources=DISK_GB:10")
    busy = next(s for s in got.provider_summaries.values() if s.name == "excl_busy")
    assert busy.resources["VCPU"].used == 8 and busy.resources["VCPU"].capacity == 8


def test_typed_request_equals_query_string(flat: Database) -> None:
    typed = CandidatesRequest(
        groups=(RequestGroup(resources={"VCPU": 1}, forbidden=frozenset({"CUSTOM_GPU"})),)
    )
    assert names_of(allocation_candidates(flat, typed)) == names_of(
        allocation_candidates(flat, {"resources": "VCPU:1", "required": ["!CUSTOM_GPU"]})
    )


def test_unknown_custom_names_are_invalid(flat: Database) -> None:
    with pytest.raises(InvalidRequest) as err:
        allocation_candidates(flat, "resources=CUSTOM_NOPE:1")
    assert err.value.code == "rpquery.resource_class.not_found"
    with pytest.raises(InvalidRequest) as err:
        allocation_candidates(flat, "resources=VCPU:1&required=CUSTOM_NOPE")
    assert err.value.token == "CUSTOM_NOPE"
    # forbidden or any-of, an unknown trait is refused too (Placement answers 400)
    for query in ("required=!CUSTOM_NOPE", "required=in:HW_CPU_X86_AVX2,CUSTOM_NOPE"):
        with pytest.raises(InvalidRequest) as err:
            allocation_candidates(flat, f"resources=VCPU:1&{query}")
        assert (err.value.code, err.value.token) == ("rpquery.trait.not_found", "CUSTOM_NOPE")


def test_empty_cloud_is_an_empty_answer(db: Database) -> None:
    got = allocation_candidates(db, "resources=VCPU:1")
    assert got.allocation_requests == () and got.to_placement()["provider_summaries"] == {}


class OnlyNamed:
    """A tiny host policy: SQL keeps hosts whose name starts with ``prefix``; ``weigh``
    prefers the highest id; ``keep`` drops one named host."""

    def __init__(self, prefix: str, drop: str | None = None) -> None:
        self.prefix, self.drop = prefix, drop
        self.calls: list[str] = []

    def where(self, root_id: ColumnElement[int]) -> ColumnElement[bool] | None:
        rp = resource_providers.alias("pol")
        return sa.exists().where(rp.c.id == root_id, rp.c.name.like(f"{self.prefix}%"))

    def keep(self, conn: Connection, root_ids: Sequence[int]) -> set[int] | None:
        self.calls.append("keep")
        if self.drop is None:
            return None
        rp = resource_providers
        dropped = conn.execute(sa.select(rp.c.id).where(rp.c.name == self.drop)).scalar()
        return {r for r in root_ids if r != dropped}

    def weigh(self, conn: Connection, root_ids: Sequence[int]) -> Mapping[int, float] | None:
        self.calls.append("weigh")
        return {r: float(r) for r in root_ids}

    @property
    def needs_all_candidates(self) -> bool:
        return True


def test_policy_where_keep_weigh_then_limit(flat: Database) -> None:
    policy = OnlyNamed("incl_", drop=None)
    got = allocation_candidates(flat, "resources=VCPU:1&limit=1", policies=[policy])
    assert names_of(got) == {"incl_cn2"}  # highest id wins the weighing
    assert policy.calls == ["keep", "weigh"]
    dropping = OnlyNamed("incl_", drop="incl_cn2")
    assert names_of(allocation_candidates(flat, "resources=VCPU:1", policies=[dropping])) == {
        "incl_cn1"
    }


def test_round_trips_do_not_grow_with_cloud(db: Database) -> None:
    counts = []
    with db.begin() as conn:
        trait_id(conn, "CUSTOM_GPU")  # defined, on no provider
    for n in (3, 30):
        with db.begin() as conn:
            for i in range(n - (counts and 3 or 0)):
                provider(conn, f"incl_{n}_{i}", inventory=COMPUTE)
        with db.count_statements() as counter:
            got = allocation_candidates(db, "resources=VCPU:1&required=!CUSTOM_GPU&limit=2")
        assert len(got.allocation_requests) == 2
        counts.append(counter.count)
    assert counts[0] == counts[1]


def test_candidate_statements_compile(flat: Database) -> None:
    stmts = candidate_statements(flat, "resources=VCPU:1&required=!CUSTOM_GPU")
    sql = " ".join(str(s.compile(flat.engine)) for s in stmts)  # type: ignore[attr-defined]
    assert "NOT (EXISTS" in sql


class SqlOnly(OnlyNamed):
    """The same filter, pushed into SQL only: ``limit`` can stay in SQL too."""

    def keep(self, conn: Connection, root_ids: Sequence[int]) -> set[int] | None:
        return None

    def weigh(self, conn: Connection, root_ids: Sequence[int]) -> Mapping[int, float] | None:
        return None

    @property
    def needs_all_candidates(self) -> bool:
        return False


def test_sql_only_policy_with_pushed_limit(flat: Database) -> None:
    got = allocation_candidates(flat, "resources=VCPU:1&limit=5", policies=[SqlOnly("excl_")])
    assert names_of(got) == {"excl_gpu", "excl_small"}  # busy is full, step needs 2s
    providers = list_providers(flat, "resources=VCPU:1", policies=[SqlOnly("incl_")])
    assert [p.name for p in providers] == ["incl_cn1", "incl_cn2"]


def test_randomized_limit_is_a_sample(flat: Database) -> None:
    full = allocation_candidates(flat, "resources=VCPU:1")
    group = RequestGroup(resources={"VCPU": 1})
    sample = allocation_candidates(
        flat, CandidatesRequest(groups=(group,), limit=2, randomize=True)
    )
    assert len(sample.allocation_requests) == 2
    assert {ar.root_uuid for ar in sample.allocation_requests} <= {
        ar.root_uuid for ar in full.allocation_requests
    }
