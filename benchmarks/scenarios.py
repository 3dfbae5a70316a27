"""The benchmark scenarios: one small function each, registered by name.

A scenario receives a :class:`Context` (the database and the loaded cloud) and returns a
:class:`Prepared`: a ``run()`` callable that does the work once and returns the number
of rows it produced, and optionally the equivalent Placement HTTP request. Scenarios
whose rpquery module has not landed are reported as "not available", not failed.

Adding one (e.g. a policy owner adding theirs) is one function, here or in a module
``benchmarks/scenarios_<feature>.py`` (found by :func:`load_plugins`)::

    @scenario("aggregate_metadata_filter", needs=("rpquery.aggregate_metadata.metadata",))
    def aggregate_metadata_filter(ctx: Context) -> Prepared:
        from rpquery.aggregate_metadata.metadata import AggregateMetadataPolicy
        ...
        return candidates(ctx, "resources=VCPU:1", policies=(policy,))
"""

from __future__ import annotations

import importlib
import random
import threading
import uuid as uuidlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from rpquery.db import Database
from rpquery.generator import CloudSummary
from rpquery.store.tables import inventories, resource_classes, resource_providers


@dataclass(frozen=True)
class Context:
    db: Database
    cloud: CloudSummary
    backend: str


@dataclass(frozen=True)
class PlacementCall:
    """The equivalent Placement request and how to compare its answer with rpquery's.

    ``normalize_ours`` and ``normalize_theirs`` turn each answer into comparable values
    (e.g. sets of allocation requests); ``exact=False`` compares only counts (random
    ``limit`` samples differ by design).
    """

    path: str
    normalize_ours: Callable[[Any], Any]
    normalize_theirs: Callable[[dict[str, Any]], Any]
    exact: bool = True


@dataclass(frozen=True)
class Prepared:
    """``run()`` does the work once and returns the rows produced; ``ops`` is the number
    of operations one ``run()`` performs (claims for write scenarios)."""

    run: Callable[[], int]
    answer: Callable[[], Any] | None = None
    placement: PlacementCall | None = None
    explain: bool = True
    ops: int = 1


@dataclass(frozen=True)
class Scenario:
    name: str
    needs: tuple[str, ...]
    build: Callable[[Context], Prepared]
    doc: str
    #: Write scenarios change the cloud, so they run after every read scenario.
    writes: bool = False

    def missing(self) -> str | None:
        """The first needed module (``module`` or ``module:attribute``) that cannot be
        imported, or ``None`` when the scenario can run."""
        for need in self.needs:
            module, _, attr = need.partition(":")
            try:
                mod = importlib.import_module(module)
            except ImportError:
                return module
            if attr and not hasattr(mod, attr):
                return need
        return None


REGISTRY: dict[str, Scenario] = {}


def load_plugins() -> dict[str, Scenario]:
    """Import every ``benchmarks/scenarios_*.py`` (scenarios added by feature owners) so
    their ``@scenario`` functions register; return the full registry."""
    import pkgutil

    import benchmarks

    for info in pkgutil.iter_modules(benchmarks.__path__):
        if info.name.startswith("scenarios_"):
            importlib.import_module(f"benchmarks.{info.name}")
    return REGISTRY


Builder = Callable[[Context], Prepared]


def scenario(
    name: str, *, needs: Sequence[str], writes: bool = False
) -> Callable[[Builder], Builder]:
    """Register a scenario builder under ``name``; ``needs`` lists ``module:attribute``
    names that must import for it to run."""

    def register(build: Builder) -> Builder:
        doc = (build.__doc__ or "").strip()
        REGISTRY[name] = Scenario(name, tuple(needs), build, doc, writes)
        return build

    return register


# ---------------------------------------------------------------- helpers


def count_rows(result: Any) -> int:
    """Rows in a result of any read function: allocation requests, providers, groups."""
    for attr in ("allocation_requests", "providers", "groups", "items"):
        value = getattr(result, attr, None)
        if value is not None and not callable(value):
            return len(value)
    try:
        return len(result)
    except TypeError:
        return 1


def _ar_set(requests: Any) -> set[frozenset[tuple[str, str, int]]]:
    out = set()
    for ar in requests:
        allocs = ar["allocations"] if isinstance(ar, dict) else ar.allocations
        pairs = []
        for rp, entry in allocs.items():
            resources = entry.get("resources", entry)
            pairs += [(rp, rc, int(n)) for rc, n in resources.items()]
        out.add(frozenset(pairs))
    return out


def _candidate_call(query: str, exact: bool) -> PlacementCall:
    return PlacementCall(
        path=f"/allocation_candidates?{query}",
        normalize_ours=lambda r: _ar_set(r.allocation_requests),
        normalize_theirs=lambda body: _ar_set(body["allocation_requests"]),
        exact=exact,
    )


def candidates(ctx: Context, query: str, *, policies: Sequence[Any] = ()) -> Prepared:
    """Time ``allocation_candidates(db, query)``; the Placement twin is the same query."""
    from rpquery.read.candidates import allocation_candidates

    def answer() -> Any:
        return allocation_candidates(ctx.db, query, policies=tuple(policies))

    exact = "limit=" not in query and not policies
    return Prepared(
        run=lambda: count_rows(answer()),
        answer=answer,
        placement=None if policies else _candidate_call(query, exact),
    )


def _provider_set(items: Any) -> set[str]:
    return {p["uuid"] if isinstance(p, dict) else p.uuid for p in items}


# ---------------------------------------------------------------- read scenarios

FORBID_GPU = "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU"
CANDIDATES = ("rpquery.read.candidates:allocation_candidates",)


@scenario("candidates_forbidden_trait", needs=CANDIDATES)
def candidates_forbidden_trait(ctx: Context) -> Prepared:
    """Single group with a forbidden trait, no limit: every fitting host."""
    return candidates(ctx, FORBID_GPU)


@scenario("candidates_forbidden_trait_limit10", needs=CANDIDATES)
def candidates_forbidden_trait_limit10(ctx: Context) -> Prepared:
    """The same with ``limit=10``: should not cost the whole cloud."""
    return candidates(ctx, FORBID_GPU + "&limit=10")


@scenario("candidates_limit1000", needs=CANDIDATES)
def candidates_limit1000(ctx: Context) -> Prepared:
    """Single group, ``limit=1000``."""
    return candidates(ctx, "resources=VCPU:1,MEMORY_MB:512&limit=1000")


@scenario("candidates_sharing_disk", needs=CANDIDATES)
def candidates_sharing_disk(ctx: Context) -> Prepared:
    """Disk from a sharing provider of the hosts' storage aggregate."""
    agg = ctx.cloud.sharing_aggregates[0] if ctx.cloud.sharing_aggregates else ""
    member = f"&member_of={agg}" if agg else ""
    return candidates(ctx, f"resources=VCPU:1,MEMORY_MB:1024,DISK_GB:100{member}")


#: Two granular VF groups on different physnets, ``group_policy=isolate``
SRIOV_ISOLATE = (
    "resources=VCPU:2,MEMORY_MB:2048"
    "&resources_NET1=SRIOV_NET_VF:1&required_NET1=CUSTOM_PHYSNET_A"
    "&resources_NET2=SRIOV_NET_VF:1&required_NET2=CUSTOM_PHYSNET_B"
    "&group_policy=isolate"
)


@scenario("candidates_sriov_isolate", needs=CANDIDATES)
def candidates_sriov_isolate(ctx: Context) -> Prepared:
    """Two granular VF groups on different physnets, ``group_policy=isolate``."""
    return candidates(ctx, SRIOV_ISOLATE)


@scenario("candidates_same_subtree", needs=CANDIDATES)
def candidates_same_subtree(ctx: Context) -> Prepared:
    """CPU and a VF under the same NUMA node (``same_subtree``)."""
    return candidates(
        ctx,
        "resources_CPU=VCPU:2,MEMORY_MB:2048&resources_NIC=SRIOV_NET_VF:1"
        "&same_subtree=_CPU,_NIC&group_policy=none",
    )


@scenario("candidates_member_of_any_traits", needs=CANDIDATES)
def candidates_member_of_any_traits(ctx: Context) -> Prepared:
    """``member_of=in:`` two host aggregates plus an any-of trait set."""
    aggs = ",".join(ctx.cloud.host_aggregates[:2])
    return candidates(
        ctx,
        f"resources=VCPU:1,MEMORY_MB:512&member_of=in:{aggs}"
        "&required=in:HW_CPU_X86_AVX2,HW_CPU_X86_AVX512F",
    )


IDENTICAL_GROUPS_50 = (
    "&".join(f"resources{i}=VCPU:1" for i in range(1, 51)) + "&group_policy=none&limit=1"
)


@scenario("candidates_50_identical_groups_limit1", needs=CANDIDATES)
def candidates_50_identical_groups_limit1(ctx: Context) -> Prepared:
    """50 granular groups of ``VCPU:1``, ``group_policy=none``, ``limit=1`` (issue 15:
    target ≤ 50 ms at 5,000 hosts). No Placement twin: Placement builds every
    combination before ``limit``: billions on a host with two NUMA nodes."""
    prepared = candidates(ctx, IDENTICAL_GROUPS_50)
    return Prepared(run=prepared.run, answer=prepared.answer)


@scenario("providers_required_forbidden", needs=("rpquery.read.providers:list_providers",))
def providers_required_forbidden(ctx: Context) -> Prepared:
    """``GET /resource_providers`` with a required and a forbidden trait."""
    from rpquery.read.providers import list_providers

    query = "required=HW_CPU_X86_AVX2,!CUSTOM_GPU"

    def answer() -> Any:
        return list_providers(ctx.db, query)

    return Prepared(
        run=lambda: count_rows(answer()),
        answer=answer,
        placement=PlacementCall(
            path=f"/resource_providers?{query}",
            normalize_ours=lambda r: _provider_set(getattr(r, "providers", r)),
            normalize_theirs=lambda body: _provider_set(body["resource_providers"]),
        ),
    )


@scenario("usages_by_consumer_type", needs=("rpquery.usage.reads:project_usages",))
def usages_by_consumer_type(ctx: Context) -> Prepared:
    """Project usages grouped by consumer type (Placement 1.38), read from the usage
    summary: the same cost whatever the project's size."""
    from rpquery.usage.reads import project_usages

    project = ctx.cloud.project_ids[0]

    def answer() -> Any:
        return project_usages(ctx.db, project)

    return Prepared(
        run=lambda: count_rows(answer()),
        answer=answer,
        placement=PlacementCall(
            f"/usages?project_id={project}", _usage_groups, _placement_usage_groups
        ),
    )


def _usage_groups(report: Any) -> dict[str, Any]:
    return {g.consumer_type: (g.consumer_count, dict(g.resources)) for g in report.groups}


def _placement_usage_groups(body: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (g["consumer_count"], {k: v for k, v in g.items() if k != "consumer_count"})
        for name, g in body["usages"].items()
    }


@scenario("usages_one_user_one_type", needs=("rpquery.usage.reads:project_usages",))
def usages_one_user_one_type(ctx: Context) -> Prepared:
    """Usages of one user of a project, INSTANCE consumers only (Placement 1.38 filters):
    two primary-key lookups in the usage summary."""
    from rpquery.usage.reads import project_usages

    project, user = ctx.cloud.project_ids[0], ctx.cloud.user_ids[0]

    def answer() -> Any:
        return project_usages(ctx.db, project, user_id=user, consumer_type="INSTANCE")

    path = f"/usages?project_id={project}&user_id={user}&consumer_type=INSTANCE"
    return Prepared(
        run=lambda: count_rows(answer()),
        answer=answer,
        placement=PlacementCall(path, _usage_groups, _placement_usage_groups),
    )


# ---------------------------------------------------------------- write scenarios


def vcpu_providers(db: Database, limit: int = 400) -> list[str]:
    """Providers with VCPU inventory (roots of flat hosts, NUMA nodes of nested ones)."""
    rp, inv, rc = resource_providers, inventories, resource_classes
    stmt = (
        sa.select(rp.c.uuid)
        .join(inv, inv.c.resource_provider_id == rp.c.id)
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(rc.c.name == "VCPU")
        .order_by(rp.c.id)
        .limit(limit)
    )
    with db.connect() as conn:
        return list(conn.execute(stmt).scalars())


#: ``send(db, consumer uuid, provider uuid, project, user)`` writes one claim.
Send = Callable[[Database, str, str, str, str], None]


def library_claim(db: Database, consumer: str, rp: str, project: str, user: str) -> None:
    """A claim through rpquery's library write function (``PUT /allocations/{consumer}``'s
    work without HTTP)."""
    from rpquery.models import ConsumerAllocations
    from rpquery.write.allocations import replace_allocations

    request = ConsumerAllocations(
        consumer, project, user, "INSTANCE", None, {rp: {"VCPU": 1, "MEMORY_MB": 256}}
    )
    replace_allocations(db, request)


def claim_project(ctx: Context) -> tuple[str, str]:
    """The project and user claims are written for: not project 0, which the usages
    scenarios read."""
    return ctx.cloud.project_ids[-1], ctx.cloud.user_ids[-1]


def _claims(ctx: Context, writers: int, per_writer: int, send: Send = library_claim) -> Prepared:
    targets = vcpu_providers(ctx.db)
    project, user = claim_project(ctx)
    rng = random.Random(7)
    lock = threading.Lock()

    def claim_some() -> None:
        for _ in range(per_writer):
            with lock:
                rp = rng.choice(targets)
            send(ctx.db, str(uuidlib.uuid4()), rp, project, user)

    def run() -> int:
        if writers == 1:
            claim_some()
            return per_writer
        errors: list[BaseException] = []

        def guarded() -> None:
            try:
                claim_some()
            except BaseException as error:  # reported after join
                errors.append(error)

        threads = [threading.Thread(target=guarded) for _ in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return writers * per_writer

    # One writer's SELECTs are EXPLAINed (on a read connection, rolled back); with 8
    # writers they are the same statements.
    return Prepared(run=run, explain=writers == 1, ops=writers * per_writer)


WRITES = ("rpquery.write.allocations:replace_allocations", "rpquery.models:ConsumerAllocations")


@scenario("claim_1_writer", needs=WRITES, writes=True)
def claim_1_writer(ctx: Context) -> Prepared:
    """Allocation writes (new consumer, one provider) by one writer, 8 per round."""
    return _claims(ctx, writers=1, per_writer=8)


@scenario("claim_8_writers", needs=WRITES, writes=True)
def claim_8_writers(ctx: Context) -> Prepared:
    """The same by 8 concurrent writers, 4 claims each per round."""
    return _claims(ctx, writers=8, per_writer=4)
