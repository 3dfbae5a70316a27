"""Issue 15, items 1-7: inputs that used to get past validation and then were refused,
stored differently or turned into a bare Python error by the database. Each one is now
``InvalidRequest`` before any statement, the same on SQLite, PostgreSQL and MariaDB,
and nothing is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from rpquery import models
from rpquery.aggregate_metadata import metadata as am
from rpquery.db import Database
from rpquery.errors import Conflict, InvalidRequest
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.read.candidates import allocation_candidates
from rpquery.read.providers import list_providers
from rpquery.read.request import (
    CandidatesRequest,
    ProvidersRequest,
    RequestGroup,
    parse_candidates,
    parse_providers,
)
from rpquery.server_groups import groups as sg
from rpquery.store import catalog
from rpquery.store.tables import aggregate_metadata as aggregate_metadata_t
from rpquery.store.tables import (
    consumers,
    inventories,
    placement_aggregates,
    resource_providers,
    traits,
)
from rpquery.store.tables import server_groups as server_groups_t
from rpquery.tags import FakeBackend, add_tag, list_tags, replace_tags
from rpquery.tags import model as tag_model
from rpquery.usage import reads as usages
from rpquery.write import associations, providers, reshaper
from rpquery.write import inventory as inv_api
from rpquery.write.allocations import replace_allocations
from tests.factories import Ref, new_uuid, provider

MAX_INT = 2**31 - 1


@pytest.fixture
def cn(db: Database) -> Ref:
    with db.begin() as conn:
        return provider(conn, "cn1", inventory={"VCPU": 8, "MEMORY_MB": 4096})


def refused(code: str, call: Callable[[], Any]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as err:
        call()
    assert err.value.code == code
    return err.value


def count(db: Database, table: sa.Table) -> int:
    with db.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


# ------------------------------------------------------------ 1. allocation_ratio


@pytest.mark.parametrize("ratio", [float("inf"), float("nan"), 1e308, 3.5e38, -1.0, 0.0])
def test_1_ratio_out_of_range_is_refused_by_inventory_writes(
    db: Database, cn: Ref, ratio: float
) -> None:
    before = count(db, inventories)
    err = refused(
        "rpquery.inventory.bad_allocation_ratio",
        lambda: inv_api.set_inventory(
            db, cn.uuid, "DISK_GB", Inventory(total=10, allocation_ratio=ratio), generation=0
        ),
    )
    assert err.token == "DISK_GB.allocation_ratio"
    assert count(db, inventories) == before
    # candidates still answer (no OverflowError from a stored inf)
    assert allocation_candidates(db, "resources=VCPU:1").allocation_requests


@pytest.mark.parametrize("ratio", [float("inf"), 1e308])
def test_1_ratio_out_of_range_is_refused_by_the_reshaper(
    db: Database, cn: Ref, ratio: float
) -> None:
    body = {
        cn.uuid: reshaper.ProviderInventories(
            0, {"VCPU": Inventory(total=8, allocation_ratio=ratio)}
        )
    }
    refused("rpquery.inventory.bad_allocation_ratio", lambda: reshaper.reshape(db, body, []))
    assert inv_api.get_inventories(db, cn.uuid)["VCPU"].allocation_ratio == 1.0


def test_1_largest_32_bit_float_ratio_is_accepted(db: Database, cn: Ref) -> None:
    inv = Inventory(total=10, allocation_ratio=3.4e38)
    inv_api.set_inventory(db, cn.uuid, "DISK_GB", inv, generation=0)
    assert inv_api.get_inventories(db, cn.uuid)["DISK_GB"].allocation_ratio == pytest.approx(
        3.4e38, rel=1e-6
    )


# ------------------------------------------------------------ 2. integers


@pytest.mark.parametrize("amount", [MAX_INT + 1, 2**63, 10**18])
def test_2_amounts_above_max_int_are_refused_in_reads(db: Database, cn: Ref, amount: int) -> None:
    err = refused(
        "rpquery.request.bad_amount",
        lambda: allocation_candidates(db, f"resources=VCPU:{amount}"),
    )
    assert str(amount) in err.token
    refused(
        "rpquery.request.bad_amount",
        lambda: list_providers(db, f"resources=VCPU:{amount}"),
    )


def test_2_amount_of_max_int_is_a_question_every_backend_answers(db: Database, cn: Ref) -> None:
    assert not allocation_candidates(db, f"resources=VCPU:{MAX_INT}").allocation_requests
    assert list_providers(db, f"resources=VCPU:{MAX_INT}") == []


@pytest.mark.parametrize("generation", [MAX_INT + 1, 2**63])
def test_2_consumer_generation_above_max_int_is_refused(
    db: Database, cn: Ref, generation: int
) -> None:
    req = ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE", generation, {cn.uuid: {"VCPU": 1}})
    refused("rpquery.consumer.bad_generation", lambda: replace_allocations(db, req))
    assert count(db, consumers) == 0


@pytest.mark.parametrize("amount", [MAX_INT + 1, 2**63])
def test_2_allocation_amount_above_max_int_is_refused(db: Database, cn: Ref, amount: int) -> None:
    req = ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE", None, {cn.uuid: {"VCPU": amount}})
    refused("rpquery.allocation.bad_amount", lambda: replace_allocations(db, req))
    assert count(db, consumers) == 0


def test_2_provider_generation_above_max_int_is_refused(db: Database, cn: Ref) -> None:
    refused(
        "rpquery.provider.bad_generation",
        lambda: inv_api.set_inventory(db, cn.uuid, "DISK_GB", Inventory(10), generation=2**31),
    )


# ------------------------------------------------------------ 5. trailing newline


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda db: catalog.create_trait(db, "CUSTOM_X\n"), "rpquery.trait.bad_name"),
        (
            lambda db: catalog.create_resource_class(db, "CUSTOM_X\n"),
            "rpquery.resource_class.bad_name",
        ),
    ],
)
def test_5_names_with_a_trailing_newline_are_refused(db: Database, call: Any, code: str) -> None:
    before = count(db, traits)
    refused(code, lambda: call(db))
    assert count(db, traits) == before
    assert "CUSTOM_X\n" not in catalog.list_resource_classes(db)


def test_5_consumer_type_with_a_trailing_newline_is_refused(db: Database, cn: Ref) -> None:
    req = ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE\n", None, {cn.uuid: {"VCPU": 1}})
    refused("rpquery.consumer.bad_type", lambda: replace_allocations(db, req))
    assert count(db, consumers) == 0


def test_5_aggregate_uuid_with_a_trailing_newline_is_refused(db: Database, cn: Ref) -> None:
    agg = new_uuid()
    refused(
        "rpquery.aggregate.bad_uuid",
        lambda: associations.set_provider_aggregates(db, cn.uuid, [agg + "\n"], generation=0),
    )
    assert count(db, placement_aggregates) == 0
    refused(
        "rpquery.request.bad_aggregate",
        lambda: list_providers(
            db, ProvidersRequest(filters=RequestGroup(member_of=[[agg + "\n"]]))
        ),
    )
    refused(
        "rpquery.trait.bad_name",
        lambda: RequestGroup(resources={"VCPU": 1}, required=[["CUSTOM_X\n"]]),
    )


# ------------------------------------------------------------ 7. one uuid rule


def test_7_upper_and_lower_case_aggregate_uuid_are_one_aggregate(db: Database, cn: Ref) -> None:
    agg = new_uuid()
    gen = associations.set_provider_aggregates(db, cn.uuid, [agg.upper()], generation=0)
    associations.set_provider_aggregates(db, cn.uuid, [agg, agg.upper()], generation=gen)
    assert associations.get_provider_aggregates(db, cn.uuid) == frozenset({agg})
    assert count(db, placement_aggregates) == 1
    for form in (agg, agg.upper(), agg.replace("-", ""), f"urn:uuid:{agg}", f"{{{agg}}}"):
        assert [p.uuid for p in list_providers(db, {"member_of": form})] == [cn.uuid]
        answer = allocation_candidates(db, {"resources": "VCPU:1", "member_of": form})
        assert len(answer.allocation_requests) == 1
        typed = ProvidersRequest(filters=RequestGroup(member_of=[[form]]))
        assert [p.uuid for p in list_providers(db, typed)] == [cn.uuid]


def test_7_upper_case_provider_uuid_names_the_stored_provider(db: Database, cn: Ref) -> None:
    gen = inv_api.set_inventory(db, cn.uuid.upper(), "DISK_GB", Inventory(10), generation=0)
    assert gen == 1
    assert "DISK_GB" in inv_api.get_inventories(db, f"urn:uuid:{cn.uuid}")
    assert [p.uuid for p in list_providers(db, {"uuid": cn.uuid.upper()})] == [cn.uuid]


# ------------------------------------------------------------ 3, 4. lone surrogates and NUL

BAD_TEXT = ["\ud800", "bad\udfffname", "a\x00b", "\x00"]


def _alloc(cn: Ref, project: str = "p", user: str = "u") -> ConsumerAllocations:
    return ConsumerAllocations(new_uuid(), project, user, "INSTANCE", None, {cn.uuid: {"VCPU": 1}})


TEXT_FIELDS: list[tuple[str, Callable[[Database, Ref, str], Any], str]] = [
    (
        "provider name",
        lambda db, cn, t: providers.create_provider(db, t),
        "rpquery.provider.bad_name",
    ),
    (
        "provider rename",
        lambda db, cn, t: providers.rename_provider(db, cn.uuid, t, generation=0),
        "rpquery.provider.bad_name",
    ),
    (
        "project id",
        lambda db, cn, t: replace_allocations(db, _alloc(cn, project=t)),
        "rpquery.consumer.bad_project",
    ),
    (
        "user id",
        lambda db, cn, t: replace_allocations(db, _alloc(cn, user=t)),
        "rpquery.consumer.bad_user",
    ),
    (
        "aggregate metadata key",
        lambda db, cn, t: am.set_metadata(db, new_uuid(), {t: "v"}),
        "rpquery.aggregate_metadata.bad_key",
    ),
    (
        "aggregate metadata value",
        lambda db, cn, t: am.set_metadata(db, new_uuid(), {"k": t}),
        "rpquery.aggregate_metadata.bad_value",
    ),
    (
        "server group name",
        lambda db, cn, t: sg.create_group(db, t, "affinity", "p", "u"),
        "rpquery.server_group.bad_name",
    ),
    (
        "server group project",
        lambda db, cn, t: sg.create_group(db, "g", "affinity", t, "u"),
        "rpquery.server_group.bad_project",
    ),
    (
        "server group user",
        lambda db, cn, t: sg.create_group(db, "g", "affinity", "p", t),
        "rpquery.server_group.bad_user",
    ),
    (
        "usage project filter",
        lambda db, cn, t: usages.project_usages(db, t),
        "rpquery.usages.bad_project_id",
    ),
    (
        "usage user filter",
        lambda db, cn, t: usages.project_usages(db, "p", user_id=t),
        "rpquery.usages.bad_user_id",
    ),
    (
        "usage totals filter",
        lambda db, cn, t: usages.project_usages_total(db, t),
        "rpquery.usages.bad_project_id",
    ),
    (
        "provider-list name filter",
        lambda db, cn, t: list_providers(db, {"name": t}),
        "rpquery.request.bad_text",
    ),
    (
        "provider-list name filter (typed)",
        lambda db, cn, t: list_providers(db, ProvidersRequest(name=t)),
        "rpquery.request.bad_text",
    ),
    (
        "candidates query value",
        lambda db, cn, t: allocation_candidates(db, {"resources": "VCPU:1", "required": t}),
        "rpquery.request.bad_text",
    ),
    (
        "extra specs",
        lambda db, cn, t: allocation_candidates(
            db, "resources=VCPU:1", policies=[am.AggregateMetadataFilter({"k": t})]
        ),
        "rpquery.extra_specs.bad_type",
    ),
    (
        "trait prefix",
        lambda db, cn, t: catalog.list_traits(db, prefix=t),
        "rpquery.trait.bad_prefix",
    ),
    (
        "instance tag",
        lambda db, cn, t: add_tag(db, FakeBackend(), new_uuid(), "x" + t),
        "rpquery.tags.",
    ),
]


@pytest.mark.parametrize("bad", BAD_TEXT, ids=["surrogate", "inner-surrogate", "nul", "only-nul"])
@pytest.mark.parametrize(("field", "call", "code"), TEXT_FIELDS, ids=[f[0] for f in TEXT_FIELDS])
def test_3_4_text_that_is_not_storable_is_refused_everywhere(
    db: Database, cn: Ref, field: str, call: Any, code: str, bad: str
) -> None:
    with pytest.raises(InvalidRequest) as err:
        call(db, cn, bad)
    assert err.value.code.startswith(code)
    assert count(db, consumers) == 0
    assert count(db, resource_providers) == 1
    assert count(db, server_groups_t) == 0
    assert count(db, aggregate_metadata_t) == 0


# ------------------------------------------------------------ 6. wrong JSON types


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda: sg.validate_group(5, "affinity", "p", "u"), "rpquery.server_group.bad_name"),
        (lambda: sg.validate_group("g", None, "p", "u"), "rpquery.server_group.unknown_policy"),
        (
            lambda: sg.validate_group("g", "affinity", None, "u"),
            "rpquery.server_group.bad_project",
        ),
        (
            lambda: sg.validate_group("g", "anti-affinity", "p", "u", rules=[1]),
            "rpquery.server_group.unknown_rule",
        ),
        (lambda: parse_providers({"name": 5}), "rpquery.request.bad_params"),
        (lambda: parse_candidates({"resources": None}), "rpquery.request.bad_params"),
        (lambda: parse_candidates({"resources": ["VCPU:1", 5]}), "rpquery.request.bad_params"),
        (lambda: parse_candidates(None), "rpquery.request.bad_params"),
        (lambda: RequestGroup(resources=None), "rpquery.request.bad_params"),
        (lambda: RequestGroup(required=[5]), "rpquery.request.bad_params"),
        (lambda: RequestGroup(resources={"VCPU": "1"}), "rpquery.request.bad_amount"),
        (lambda: RequestGroup(resources={5: 1}), "rpquery.resource_class.bad_name"),
        (lambda: RequestGroup(in_tree=5), "rpquery.request.bad_in_tree"),
        (lambda: CandidatesRequest(groups=None), "rpquery.request.bad_params"),
        (
            lambda: CandidatesRequest(groups=(RequestGroup(resources={"VCPU": 1}),), limit="5"),
            "rpquery.request.bad_limit",
        ),
        (lambda: catalog.check_trait_name(["CUSTOM_X"]), "rpquery.trait.bad_name"),
        (
            lambda: tag_model.validate_namespace(tag_model.DEFAULT_CONFIG, ["user"]),
            "rpquery.tags.unknown_namespace",
        ),
        (
            lambda: tag_model.validate_tags(tag_model.DEFAULT_CONFIG, "user", 5),
            "rpquery.tags.bad_list",
        ),
        (lambda: tag_model.validate_instance(5), "rpquery.tags.bad_instance"),
        (lambda: am.validate_items(["k"]), "rpquery.aggregate_metadata.empty"),
        (lambda: am.check_aggregate_uuid(None), "rpquery.aggregate_metadata.bad_uuid"),
        (lambda: usages.check_consumer_type_filter(["all"]), "rpquery.consumer.bad_type"),
        (
            lambda: models.ConsumerAllocations(new_uuid(), "p", "u", "I", None, [1]),
            "rpquery.allocation.bad_allocations",
        ),
        (lambda: reshaper.parse_reshape_body([]), "rpquery.reshape.bad_body"),
    ],
)
def test_6_wrong_json_types_are_invalid_requests(call: Any, code: str) -> None:
    refused(code, call)


def test_6_max_server_per_host_is_bounded(db: Database) -> None:
    for bad in (2**31, str(2**31), 2**63, 0, "²", 1.5):
        refused(
            "rpquery.server_group.bad_rule_value",
            lambda bad=bad: sg.create_group(
                db, "g", "anti-affinity", "p", "u", {"max_server_per_host": bad}
            ),
        )
    assert count(db, server_groups_t) == 0
    group = sg.create_group(db, "g", "anti-affinity", "p", "u", {"max_server_per_host": MAX_INT})
    assert sg.get_group(db, group.uuid).max_server_per_host == MAX_INT


# ------------------------------------------------------------ 7. one uuid rule (continued)


def test_7_urn_form_instance_id_shares_the_canonical_tag_set(db: Database) -> None:
    vm, fake = new_uuid(), FakeBackend()
    add_tag(db, fake, f"urn:uuid:{vm}", "web")
    add_tag(db, fake, vm.upper(), "db")
    assert {t.tag for t in list_tags(db, vm)} == {"web", "db"}
    assert {t.tag for t in list_tags(db, "{" + vm + "}")} == {"web", "db"}
    assert fake.instances() == {vm}
    limit = tag_model.DEFAULT_CONFIG.max_tags
    replace_tags(db, fake, vm, ["web", "db"] + [f"t{i}" for i in range(limit - 2)])
    with pytest.raises(Conflict) as err:
        add_tag(db, fake, f"urn:uuid:{vm}", "one-more")
    assert err.value.code == "rpquery.tags.limit_reached"
    assert len(list_tags(db, vm)) == limit


def test_7_aggregate_metadata_case_forms_are_one_aggregate(db: Database) -> None:
    agg = new_uuid()
    am.set_metadata(db, agg.upper(), {"ssd": "true"})
    am.set_metadata(db, agg, {"gpu": "yes"})
    assert dict(am.get_metadata(db, f"urn:uuid:{agg}").items) == {"gpu": "yes", "ssd": "true"}
    assert [m.aggregate_uuid for m in am.list_metadata(db)] == [agg]


def test_7_server_group_members_are_canonical(db: Database) -> None:
    vm = new_uuid()
    group = sg.create_group(db, "g", "affinity", "p", "u", group_uuid=new_uuid().upper())
    assert group.uuid == group.uuid.lower()
    sg.add_members(db, group.uuid.upper(), [f"urn:uuid:{vm}", vm.upper()])
    members = sg.show_group(db, "{" + group.uuid + "}").members
    assert [m.instance_uuid for m in members] == [vm]
