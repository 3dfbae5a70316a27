"""Seeded random small clouds, and the Placement REST calls that write them.

A cloud is a few compute trees (flat hosts, NUMA children, PFs under NUMA nodes or
hosts, resourceless children carrying only traits), a few sharing providers
(``MISC_SHARES_VIA_AGGREGATE``) and the aggregates that link them, standard and custom
traits, custom resource classes, inventories with reserved / min / max / step and
ratios such as 0.7 and 1.5, and existing allocations of consumers with projects,
users and consumer types (some untyped, written at microversion 1.37).

>>> c = make_cloud(7)
>>> c == make_cloud(7), len(c.providers) >= 3, c.roots() != []
(True, True, True)
"""

from __future__ import annotations

import random
import uuid as uuidlib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

SHARING = "MISC_SHARES_VIA_AGGREGATE"
CUSTOM_RCS = ("CUSTOM_FPGA", "CUSTOM_MAGIC")
CUSTOM_TRAITS = ("CUSTOM_GOLD", "CUSTOM_BAR", "CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B")
HOST_TRAITS = ("HW_CPU_X86_AVX2", "HW_CPU_X86_SSE", "CUSTOM_GOLD", "COMPUTE_VOLUME_MULTI_ATTACH")
CHILD_TRAITS = ("HW_NUMA_ROOT", "CUSTOM_BAR", "HW_CPU_X86_AVX2", "CUSTOM_GOLD")
PF_TRAITS = ("CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B", "HW_NIC_ACCEL_SSL", "CUSTOM_BAR")
SHARED_TRAITS = ("STORAGE_DISK_SSD", "CUSTOM_GOLD")
#: Request amounts and inventories are multiples of a class's unit.
UNIT = {"MEMORY_MB": 256, "DISK_GB": 10}
RATIOS = ("1.0", "1.0", "1.0", "0.7", "1.5", "2.0", "4.0", "0.9", "1.1", "16.0")
PROJECTS = ("proj-a", "proj-b", "proj-c")
USERS = ("user-1", "user-2", "user-3")
CONSUMER_TYPES = ("INSTANCE", "INSTANCE", "MIGRATION", None)


def unit(rc: str) -> int:
    return UNIT.get(rc, 1)


@dataclass(frozen=True)
class Inventory:
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = 2147483647
    step_size: int = 1
    ratio: str = "1.0"  # as written: the decimal Placement is sent

    def capacity(self) -> Fraction:
        """``(total - reserved) * allocation_ratio``, exactly, from the written ratio."""
        return (self.total - self.reserved) * Fraction(self.ratio)

    def fits(self, amount: int) -> bool:
        return self.min_unit <= amount <= self.max_unit and amount % self.step_size == 0

    def body(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "reserved": self.reserved,
            "min_unit": self.min_unit,
            "max_unit": self.max_unit,
            "step_size": self.step_size,
            "allocation_ratio": float(self.ratio),
        }


@dataclass
class Provider:
    name: str
    uuid: str
    parent: str | None = None  # parent's name
    inventory: dict[str, Inventory] = field(default_factory=dict)
    traits: set[str] = field(default_factory=set)
    aggs: set[str] = field(default_factory=set)

    @property
    def sharing(self) -> bool:
        return SHARING in self.traits


@dataclass
class Consumer:
    uuid: str
    project: str
    user: str
    ctype: str | None
    allocations: dict[str, dict[str, int]]  # provider name -> class -> amount


@dataclass
class Cloud:
    seed: int
    providers: dict[str, Provider]  # parents before children
    aggregates: dict[str, str]  # label (A0, A1...) -> uuid
    consumers: list[Consumer] = field(default_factory=list)

    def by_uuid(self, rp_uuid: str) -> Provider:
        return next(p for p in self.providers.values() if p.uuid == rp_uuid)

    def root(self, name: str) -> str:
        while self.providers[name].parent is not None:
            name = self.providers[name].parent  # type: ignore[assignment]
        return name

    def roots(self) -> list[str]:
        return [n for n, p in self.providers.items() if p.parent is None]

    def ancestors(self, name: str) -> list[str]:
        out = [name]
        while self.providers[out[-1]].parent is not None:
            out.append(self.providers[out[-1]].parent)  # type: ignore[arg-type]
        return out

    def tree(self, root: str) -> list[str]:
        return [n for n in self.providers if self.root(n) == root]

    def used(self, name: str, rc: str) -> int:
        return sum(c.allocations.get(name, {}).get(rc, 0) for c in self.consumers)

    def label(self, rp_uuid: str) -> str:
        """A provider's or aggregate's readable name (for diffs)."""
        for p in self.providers.values():
            if p.uuid == rp_uuid:
                return p.name
        for label, agg in self.aggregates.items():
            if agg == rp_uuid:
                return label
        return rp_uuid

    def traits_used(self) -> list[str]:
        return sorted(set().union(*(p.traits for p in self.providers.values())))

    def classes_used(self) -> list[str]:
        return sorted(set().union(*(p.inventory.keys() for p in self.providers.values())))


# ---------------------------------------------------------------- generation


def _uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def _ratio(rng: random.Random, usable: int) -> str:
    """A ratio whose double product with ``usable`` is not below the exact one (so
    the double arithmetic of SQLite and PostgreSQL never decides a boundary)."""
    ratio = rng.choice(RATIOS)
    if usable * float(ratio) < usable * Fraction(ratio):
        return "1.0"
    return ratio


def _inventory(rng: random.Random, rc: str, low: int = 2, high: int = 12) -> Inventory:
    u = unit(rc)
    total = u * rng.randint(low, high)
    reserved = u * rng.choice((0, 0, 0, 1, 2)) if total > 2 * u else 0
    min_unit = u * rng.choice((1, 1, 1, 1, 1, 2))
    step = rng.choice((1, 1, 1, 1, 2)) * (u if rng.random() < 0.5 else 1)
    max_unit = rng.choice((2147483647, total, u * rng.randint(2, 6)))
    max_unit = max(max_unit, min_unit)
    return Inventory(total, reserved, min_unit, max_unit, step, _ratio(rng, total - reserved))


def _aggs(rng: random.Random, aggs: list[str], p: float) -> set[str]:
    return {a for a in aggs if rng.random() < p}


def _sample(rng: random.Random, names: tuple[str, ...], p: float) -> set[str]:
    return {n for n in names if rng.random() < p}


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        n_aggs = self.rng.randint(2, 4)
        self.cloud = Cloud(seed, {}, {f"A{i}": _uuid(self.rng) for i in range(n_aggs)})
        self.aggs = list(self.cloud.aggregates.values())

    def add(self, name: str, parent: str | None, classes: dict[str, Inventory], **kw: Any) -> str:
        self.cloud.providers[name] = Provider(name, _uuid(self.rng), parent, classes, **kw)
        return name

    def host(self, i: int) -> None:
        rng = self.rng
        shape = rng.choice(("flat", "flat", "numa", "numa_pf", "pf", "gpu"))
        name = f"cn{i}"
        classes: dict[str, Inventory] = {}
        if shape in ("flat", "pf", "gpu"):
            classes = {rc: _inventory(rng, rc) for rc in ("VCPU", "MEMORY_MB")}
        if rng.random() < 0.4:
            classes["DISK_GB"] = _inventory(rng, "DISK_GB")
        if rng.random() < 0.15:
            classes["CUSTOM_FPGA"] = _inventory(rng, "CUSTOM_FPGA", 1, 3)
        traits = _sample(rng, HOST_TRAITS, 0.35)
        self.add(name, None, classes, traits=traits, aggs=_aggs(rng, self.aggs, 0.4))
        if shape.startswith("numa"):
            for j in range(rng.randint(1, 2)):
                numa = self.child(f"{name}_numa{j}", name, ("VCPU", "MEMORY_MB"), CHILD_TRAITS)
                if shape == "numa_pf" and rng.random() < 0.8:
                    self.child(f"{numa}_pf", numa, ("SRIOV_NET_VF",), PF_TRAITS)
        if shape == "pf":
            for j in range(rng.randint(1, 2)):
                self.child(f"{name}_pf{j}", name, ("SRIOV_NET_VF",), PF_TRAITS)
        if shape == "gpu":
            self.child(f"{name}_gpu", name, (rng.choice(("VGPU", "CUSTOM_MAGIC")),), CHILD_TRAITS)
        if rng.random() < 0.25:  # a resourceless child: only traits
            self.child(f"{name}_nic", name, (), PF_TRAITS)

    def child(self, name: str, parent: str, rcs: tuple[str, ...], pool: tuple[str, ...]) -> str:
        rng = self.rng
        classes = {rc: _inventory(rng, rc, 1 if rc == "SRIOV_NET_VF" else 2) for rc in rcs}
        traits = _sample(rng, pool, 0.4)
        if pool is CHILD_TRAITS and "VCPU" in rcs and rng.random() < 0.7:
            traits.add("HW_NUMA_ROOT")
        return self.add(name, parent, classes, traits=traits, aggs=_aggs(rng, self.aggs, 0.15))

    def sharing(self, k: int) -> None:
        rng = self.rng
        rcs = ["DISK_GB"] if rng.random() < 0.8 else []
        if rng.random() < 0.4 or not rcs:
            rcs.append(rng.choice(("IPV4_ADDRESS", "CUSTOM_MAGIC")))
        classes = {rc: _inventory(rng, rc, 3, 20) for rc in rcs}
        traits = {SHARING} | _sample(rng, SHARED_TRAITS, 0.4)
        aggs = set(rng.sample(self.aggs, rng.randint(1, 2)))
        self.add(f"ss{k}", None, classes, traits=traits, aggs=aggs)

    def consumers(self) -> None:
        rng = self.rng
        for _ in range(rng.randint(3, 10)):
            root = rng.choice(self.cloud.roots())
            near = [n for n in self.cloud.providers if self.cloud.root(n) == root]
            sharing = [n for n, p in self.cloud.providers.items() if p.sharing]
            allocs = self.allocation(near + (sharing if rng.random() < 0.3 else []))
            if allocs:
                self.cloud.consumers.append(
                    Consumer(
                        _uuid(rng),
                        rng.choice(PROJECTS),
                        rng.choice(USERS),
                        rng.choice(CONSUMER_TYPES),
                        allocs,
                    )
                )

    def allocation(self, names: list[str]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for name in names:
            for rc, inv in self.cloud.providers[name].inventory.items():
                if self.rng.random() < 0.5:
                    continue
                free = inv.capacity() - self.cloud.used(name, rc)
                amounts = [
                    a
                    for a in range(inv.min_unit, min(inv.max_unit, int(free)) + 1)
                    if inv.fits(a) and a % unit(rc) == 0
                ]
                if amounts:
                    out.setdefault(name, {})[rc] = self.rng.choice(amounts[:4])
        return out


def make_cloud(seed: int) -> Cloud:
    """The cloud of ``seed`` (same seed, same cloud, uuids included)."""
    b = _Builder(seed)
    for i in range(b.rng.randint(2, 4)):
        b.host(i)
    for k in range(b.rng.choice((0, 1, 1, 2))):
        b.sharing(k)
    b.consumers()
    return b.cloud


# ---------------------------------------------------------------- Placement writes


def write_requests(cloud: Cloud) -> list[dict[str, Any]]:
    """Placement REST calls that build ``cloud``; every one must succeed (2xx)."""
    out: list[dict[str, Any]] = []
    custom_rcs = sorted({rc for rc in cloud.classes_used() if rc.startswith("CUSTOM_")})
    custom_traits = sorted({t for t in cloud.traits_used() if t.startswith("CUSTOM_")})
    out += [{"method": "PUT", "path": f"/resource_classes/{rc}"} for rc in custom_rcs]
    out += [{"method": "PUT", "path": f"/traits/{t}"} for t in custom_traits]
    for p in cloud.providers.values():
        body: dict[str, Any] = {"name": p.name, "uuid": p.uuid}
        if p.parent is not None:
            body["parent_provider_uuid"] = cloud.providers[p.parent].uuid
        out.append({"method": "POST", "path": "/resource_providers", "body": body})
        gen = 0
        base = f"/resource_providers/{p.uuid}"
        for what, key, value in (
            ("inventories", "inventories", {rc: i.body() for rc, i in p.inventory.items()}),
            ("traits", "traits", sorted(p.traits)),
            ("aggregates", "aggregates", sorted(p.aggs)),
        ):
            if value:
                body = {key: value, "resource_provider_generation": gen}
                out.append({"method": "PUT", "path": f"{base}/{what}", "body": body})
                gen += 1
    for c in cloud.consumers:
        out.append(_allocation_put(cloud, c))
    return out


def _allocation_put(cloud: Cloud, c: Consumer) -> dict[str, Any]:
    body: dict[str, Any] = {
        "allocations": {
            cloud.providers[n].uuid: {"resources": dict(r)} for n, r in c.allocations.items()
        },
        "project_id": c.project,
        "user_id": c.user,
        "consumer_generation": None,
    }
    item = {"method": "PUT", "path": f"/allocations/{c.uuid}", "body": body}
    if c.ctype is None:
        item["version"] = "1.37"  # no consumer_type before 1.38: the consumer is untyped
    else:
        body["consumer_type"] = c.ctype
    return item
