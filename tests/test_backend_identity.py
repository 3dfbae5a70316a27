"""Owner identity is exact on every backend (issue 15, item 8).

MySQL/MariaDB's default collation (``utf8mb4_general_ci``, Placement's column
definitions) folds case and accents and ignores trailing spaces. rpquery's lookups
compare byte for byte anyway, so ``PROJ`` never reads ``proj``'s usage; where the
unique index makes two ids one, creating the second is a ``Conflict`` naming the
collation, not a retried ``ConcurrentUpdate``.
"""

from __future__ import annotations

import pytest

from rpquery import allocations as alloc_api
from rpquery import usages
from rpquery.allocations import ConsumerAllocations
from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, Conflict
from rpquery.provider_list import list_providers
from rpquery.providers import create_provider
from tests.factories import new_uuid, provider

TWINS = ["PROJ", "Proj", "proj ", "prój"]


def _claim(db: Database, rp_uuid: str, project: str, user: str = "bob") -> str:
    consumer = new_uuid()
    alloc_api.replace_allocations(
        db,
        ConsumerAllocations(
            consumer,
            consumer_generation=None,
            project_id=project,
            user_id=user,
            consumer_type="INSTANCE",
            allocations={rp_uuid: {"VCPU": 1}},
        ),
    )
    return consumer


@pytest.fixture
def host(db: Database) -> str:
    with db.begin() as conn:
        return provider(conn, "cn1", inventory={"VCPU": 64}).uuid


@pytest.mark.parametrize("twin", TWINS)
def test_project_twin_is_a_distinct_owner_or_a_named_conflict(
    db: Database, host: str, twin: str
) -> None:
    _claim(db, host, "proj")
    if db.dialect_name == "mysql":
        with pytest.raises(Conflict) as caught:
            _claim(db, host, twin)
        assert not isinstance(caught.value, ConcurrentUpdate)  # permanent: no retry
        assert caught.value.code == "rpquery.owner.collation_conflict"
        assert "utf8mb4_general_ci" in caught.value.detail
        assert caught.value.token == twin
    else:
        _claim(db, host, twin)
        assert usages.project_usages_total(db, twin) == {"VCPU": 1}
    assert usages.project_usages_total(db, "proj") == {"VCPU": 1}


@pytest.mark.parametrize("twin", TWINS)
def test_usages_of_a_twin_project_are_not_the_projects(db: Database, host: str, twin: str) -> None:
    _claim(db, host, "proj")
    assert usages.project_usages(db, twin).groups == ()
    assert usages.project_usages_scan(db, twin).groups == ()
    assert usages.project_usages_total(db, twin) == {}
    assert usages.project_usages_total_scan(db, twin) == {}
    assert usages.project_usages(db, "proj", user_id="Bob").groups == ()
    assert usages.project_usages_total(db, "proj", user_id="bob ") == {}
    assert usages.project_usages_total(db, "proj", user_id="bob") == {"VCPU": 1}


def test_user_twin_is_a_distinct_owner_or_a_named_conflict(db: Database, host: str) -> None:
    _claim(db, host, "proj", user="bob")
    if db.dialect_name == "mysql":
        with pytest.raises(Conflict) as caught:
            _claim(db, host, "proj", user="Bob")
        assert type(caught.value) is Conflict
        assert caught.value.code == "rpquery.owner.collation_conflict"
        assert "users.external_id" in caught.value.detail
    else:
        _claim(db, host, "proj", user="Bob")
        assert usages.project_usages_total(db, "proj", user_id="Bob") == {"VCPU": 1}


def test_provider_name_filter_is_exact(db: Database) -> None:
    create_provider(db, "Web")
    assert [p.name for p in list_providers(db, {"name": "Web"})] == ["Web"]
    assert list_providers(db, {"name": "web"}) == []
    assert list_providers(db, {"name": "Wéb"}) == []
