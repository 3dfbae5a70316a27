"""The 13 fixture classes Placement's gabbi YAML files name, built on rpquery.

Each class has the name a YAML file's ``fixtures:`` key uses and builds the same
providers, inventories, traits, aggregates and allocations as Placement 16.0's fixture of
that name (``placement/tests/functional/fixtures/gabbits.py``), through rpquery's write
API, and sets the same environment variables the YAML files read (``$ENVIRON['RP_UUID']``
...). Every fixture starts on an empty database (one per backend, emptied before each
YAML file: the same state as a fresh one) and a new WSGI app.

A fixture namespace is made per backend (:func:`for_backend`), because gabbi looks the
classes up by name on one module-like object and the backend must travel with them.
"""

from __future__ import annotations

import os
import types
import uuid
from collections.abc import Iterable
from typing import Any, ClassVar

from gabbi import fixture

from rpquery.db import Database
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.store import catalog
from rpquery.write import allocations, associations, inventory, providers
from tests.gabbi import harness


def _new_uuid() -> str:
    return str(uuid.uuid4())


class Builder:
    """Small write helpers over one database, named after what the fixtures do."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def provider(
        self, name: str, *aggs: str, parent: str | None = None, rp_uuid: str | None = None
    ) -> str:
        rp = providers.create_provider(
            self.db, name, uuid=rp_uuid or _new_uuid(), parent_uuid=parent
        )
        if aggs:
            self.aggregates(rp.uuid, *aggs)
        return rp.uuid

    def _generation(self, rp_uuid: str) -> int:
        return providers.get_provider(self.db, rp_uuid).generation

    def resource_class(self, name: str) -> None:
        if name.startswith("CUSTOM_") and name not in catalog.list_resource_classes(self.db):
            catalog.create_resource_class(self.db, name)

    def inventory(self, rp_uuid: str, rc: str, total: int, **fields: Any) -> None:
        """One class's inventory; ``max_unit`` defaults to ``total`` as in Placement's."""
        self.resource_class(rc)
        inv = Inventory(total=total, **fields)
        inventory.set_inventory(self.db, rp_uuid, rc, inv, generation=self._generation(rp_uuid))

    def traits(self, rp_uuid: str, *names: str) -> None:
        for name in names:
            if name.startswith("CUSTOM_"):
                catalog.create_trait(self.db, name)
        associations.set_provider_traits(
            self.db, rp_uuid, names, generation=self._generation(rp_uuid)
        )

    def aggregates(self, rp_uuid: str, *aggs: str) -> None:
        associations.set_provider_aggregates(
            self.db, rp_uuid, aggs, generation=self._generation(rp_uuid)
        )

    def allocate(
        self,
        rp_uuid: str,
        project: str,
        user: str,
        used: dict[str, int],
        consumer: str | None = None,
    ) -> str:
        """A new consumer (no consumer type, like Placement's fixtures) holding ``used``
        on ``rp_uuid``; returns its uuid."""
        consumer = consumer or _new_uuid()
        allocations.replace_allocations(
            self.db,
            ConsumerAllocations(
                consumer_uuid=consumer,
                project_id=project,
                user_id=user,
                consumer_type=None,
                consumer_generation=None,
                allocations={rp_uuid: used},
            ),
        )
        return consumer


def _export(**values: str) -> None:
    os.environ.update(values)


class APIFixture(fixture.GabbiFixture):
    """An empty database, a new app and the environment every YAML file uses."""

    #: Set by :func:`for_backend` on the per-backend subclasses.
    backend: ClassVar[str] = "sqlite"
    #: Keyword arguments for the app (``harness.make_app``); CORS and policy fixtures add some.
    app_options: ClassVar[dict[str, Any]] = {}

    def start_fixture(self) -> None:
        db = harness.fresh_database(self.backend)
        harness.start_app(self.backend, db, **self.app_options)
        self.build = Builder(db)
        for name in (
            "RP_UUID",
            "RP_NAME",
            "RP_UUID1",
            "RP_NAME1",
            "RP_UUID2",
            "RP_NAME2",
            "PROJECT_ID",
            "ADMIN_PROJECT_ID",
            "SERVICE_PROJECT_ID",
            "USER_ID",
            "PROJECT_ID_ALT",
            "USER_ID_ALT",
            "INSTANCE_UUID",
            "MIGRATION_UUID",
            "CONSUMER_UUID",
            "PARENT_PROVIDER_UUID",
            "ALT_PARENT_PROVIDER_UUID",
        ):
            os.environ[name] = _new_uuid()
        _export(
            CUSTOM_RES_CLASS="CUSTOM_IRON_NFV",
            CUSTOM_RES_CLASS1="CUSTOM_IRON_NFV1",
            CUSTOM_RES_CLASS2="CUSTOM_IRON_NFV2",
        )

    def stop_fixture(self) -> None:
        harness.stop_app(self.backend)


class AllocationFixture(APIFixture):
    """One provider (VCPU 10, DISK_GB 2048 in steps of 10) and three consumers of two
    users in one project: DISK_GB 1000; VCPU 6; and (the other user) VCPU 1 + DISK_GB 20."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.build
        os.environ["ALT_USER_ID"] = _new_uuid()
        project, user, alt_user = (os.environ[k] for k in ("PROJECT_ID", "USER_ID", "ALT_USER_ID"))
        rp = b.provider(os.environ["RP_NAME"], rp_uuid=os.environ["RP_UUID"])
        b.inventory(rp, "DISK_GB", 2048, step_size=10, min_unit=10, max_unit=1000)
        b.inventory(rp, "VCPU", 10, max_unit=10)
        _export(
            CONSUMER_0=b.allocate(rp, project, user, {"DISK_GB": 1000}),
            CONSUMER_ID=b.allocate(rp, project, user, {"VCPU": 6}),
            ALT_CONSUMER_ID=b.allocate(rp, project, alt_user, {"DISK_GB": 20, "VCPU": 1}),
            ALT_RP_UUID=_new_uuid(),
            ALT_RP_NAME=_new_uuid(),
        )


class SharedStorageFixture(APIFixture):
    """Two compute nodes and two sharing DISK_GB providers in one aggregate; each compute
    node has two NUMA children with one SRIOV_NET_VF PF each (cn2 has local disk too)."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.build
        agg = _new_uuid()
        cn1, cn2, ss, ss2 = (b.provider(n, agg) for n in ("cn1", "cn2", "ss", "ss2"))
        numa = {
            f"{c}_{i}": b.provider(f"numa{c}_{i}", parent=p)
            for c, p in (("1", cn1), ("2", cn2))
            for i in (1, 2)
        }
        pfs = {k: b.provider(f"pf{k}", parent=p) for k, p in numa.items()}
        _export(AGG_UUID=agg, CN1_UUID=cn1, CN2_UUID=cn2, SS_UUID=ss, SS2_UUID=ss2)
        _export(**{f"NUMA{k}_UUID": v for k, v in numa.items()})
        _export(**{f"PF{k}_UUID": v for k, v in pfs.items()})
        for cn in (cn1, cn2):
            b.inventory(cn, "VCPU", 24, allocation_ratio=16.0)
            b.inventory(cn, "MEMORY_MB", 128 * 1024, allocation_ratio=1.5)
        b.traits(cn1, "HW_CPU_X86_SSE", "HW_CPU_X86_SSE2")
        b.inventory(cn2, "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
        for shared in (ss, ss2):
            b.inventory(shared, "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
            b.traits(shared, "MISC_SHARES_VIA_AGGREGATE")
        for pf in pfs.values():
            b.inventory(pf, "SRIOV_NET_VF", 8, allocation_ratio=1.0)


class NUMAAggregateFixture(APIFixture):
    """Two resourceless compute nodes (aggA; cn2 also aggB) with two NUMA children of 24
    VCPU each; ss1 shares DISK_GB via aggA, ss2 via aggC which only numa1_1 is in."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.build
        agg_a, agg_b, agg_c = _new_uuid(), _new_uuid(), _new_uuid()
        cn1 = b.provider("cn1", agg_a)
        cn2 = b.provider("cn2", agg_a, agg_b)
        ss1 = b.provider("ss1", agg_a)
        ss2 = b.provider("ss2", agg_c)
        numas = {
            "1_1": b.provider("numa1_1", agg_c, parent=cn1),
            "1_2": b.provider("numa1_2", parent=cn1),
            "2_1": b.provider("numa2_1", parent=cn2),
            "2_2": b.provider("numa2_2", parent=cn2),
        }
        _export(
            AGGA_UUID=agg_a,
            AGGB_UUID=agg_b,
            AGGC_UUID=agg_c,
            CN1_UUID=cn1,
            CN2_UUID=cn2,
            SS1_UUID=ss1,
            SS2_UUID=ss2,
        )
        _export(**{f"NUMA{k}_UUID": v for k, v in numas.items()})
        for numa in numas.values():
            b.inventory(numa, "VCPU", 24, allocation_ratio=16.0)
        for ss in (ss1, ss2):
            b.inventory(ss, "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
            b.traits(ss, "MISC_SHARES_VIA_AGGREGATE")


class NUMANetworkFixture(APIFixture):
    """cn1: no inventory, two HW_NUMA_ROOT NUMA children (VCPU, MEMORY_MB with unit rules,
    FPGA / VGPU grandchildren) and two network agents with bandwidth devices; cn2: VCPU,
    MEMORY_MB, DISK_GB and three NIC roots with VF PFs on two physnets; ss1 shares DISK_GB
    with both via aggA. Two consumers hold 2 VCPU on numa0 and 3 VCPU on cn2."""

    def start_fixture(self) -> None:
        super().start_fixture()
        self.make_entities()

    def make_roots(self, agg_a: str) -> tuple[str, str]:
        return self.build.provider("cn1", agg_a), self.build.provider("cn2")

    def make_entities(self) -> None:
        b = self.build
        agg_a = _new_uuid()
        ss1 = b.provider("ss1", agg_a)
        b.traits(ss1, "MISC_SHARES_VIA_AGGREGATE")
        b.inventory(ss1, "DISK_GB", 2000)
        cn1, cn2 = self.make_roots(agg_a)
        _export(AGGA_UUID=agg_a, SS1_UUID=ss1, CN1_UUID=cn1, CN2_UUID=cn2)
        b.aggregates(cn1, agg_a)
        b.traits(cn1, "COMPUTE_VOLUME_MULTI_ATTACH")
        numa0, numa1 = self._numa_nodes(cn1)
        self._agents(cn1)
        b.aggregates(cn2, agg_a)
        b.inventory(cn2, "VCPU", 8)
        b.allocate(cn2, "numafx-project", "numafx-user", {"VCPU": 3})
        b.inventory(cn2, "MEMORY_MB", 2048, min_unit=1024, step_size=128)
        b.inventory(cn2, "DISK_GB", 1000)
        b.traits(cn2, "CUSTOM_FOO")
        self._nics(cn2)

    def _numa_nodes(self, cn1: str) -> list[str]:
        b = self.build
        numas = []
        for i in (0, 1):
            numa = b.provider(f"numa{i}", parent=cn1)
            b.traits(numa, "HW_NUMA_ROOT", *(("CUSTOM_FOO",) if i == 1 else ()))
            b.inventory(numa, "VCPU", 4)
            numas.append(numa)
            os.environ[f"NUMA{i}_UUID"] = numa
        b.inventory(numas[0], "MEMORY_MB", 2048, min_unit=512, step_size=256)
        b.inventory(numas[1], "MEMORY_MB", 2048, min_unit=256, max_unit=1024)
        b.allocate(numas[0], "numafx-project", "numafx-user", {"VCPU": 2})
        fpga0 = b.provider("fpga0", parent=numas[0])
        b.inventory(fpga0, "FPGA", 1)
        pgpu0 = b.provider("pgpu0", parent=numas[0])
        b.inventory(pgpu0, "VGPU", 8)
        _export(FPGA0_UUID=fpga0, PGPU0_UUID=pgpu0)
        for i in (0, 1):
            fpga = b.provider(f"fpga1_{i}", parent=numas[1])
            b.inventory(fpga, "FPGA", 1)
            os.environ[f"FPGA1_{i}_UUID"] = fpga
        return numas

    def _agents(self, cn1: str) -> None:
        b = self.build
        sriov = b.provider("sriov_agent", parent=cn1)
        b.traits(sriov, "CUSTOM_VNIC_TYPE_DIRECT")
        os.environ["SRIOV_AGENT_UUID"] = sriov
        for i in (1, 2):
            esn = b.provider(f"esn{i}", parent=sriov)
            b.traits(esn, f"CUSTOM_PHYSNET{i}")
            b.inventory(esn, "NET_BW_EGR_KILOBIT_PER_SEC", 10000 * i)
            os.environ[f"ESN{i}_UUID"] = esn
        ovs = b.provider("ovs_agent", parent=cn1)
        b.traits(ovs, "CUSTOM_VNIC_TYPE_NORMAL")
        br_int = b.provider("br_int", parent=ovs)
        b.traits(br_int, "CUSTOM_PHYSNET0")
        b.inventory(br_int, "NET_BW_EGR_KILOBIT_PER_SEC", 1000)
        _export(OVS_AGENT_UUID=ovs, BR_INT_UUID=br_int)

    def _nics(self, cn2: str) -> None:
        b = self.build
        nics = []
        for i in (1, 2, 3):
            nic = b.provider(f"nic{i}", parent=cn2)
            b.traits(nic, "CUSTOM_HW_NIC_ROOT")
            nics.append(nic)
            os.environ[f"NIC{i}_UUID"] = nic
        # (suffix, nic, physnet, VFs)
        pfs = [("1_1", 0, 1, 4), ("1_2", 0, 2, 4)]
        pfs += [(f"2_{i + 1}", 1, i % 2 + 1, 2) for i in range(4)]
        pfs += [("3_1", 2, 1, 8)]
        for suffix, nic, physnet, vfs in pfs:
            pf = b.provider(f"pf{suffix}", parent=nics[nic])
            b.traits(pf, f"CUSTOM_PHYSNET{physnet}")
            b.inventory(pf, "CUSTOM_VF", vfs)
            os.environ[f"PF{suffix}_UUID"] = pf


class DeepNUMANetworkFixture(NUMANetworkFixture):
    """NUMANetworkFixture with cn1 and cn2 under resourceless parents p1 and p2, both
    under grandparent gp1 (for same_subtree across deeper trees)."""

    def make_roots(self, agg_a: str) -> tuple[str, str]:
        b = self.build
        gp1 = b.provider("gp1")
        p1 = b.provider("p1", parent=gp1)
        p2 = b.provider("p2", parent=gp1)
        return b.provider("cn1", parent=p1), b.provider("cn2", parent=p2)


class NonSharedStorageFixture(APIFixture):
    """Three compute nodes with VCPU, MEMORY_MB and local DISK_GB; three aggregate uuids
    exported but not used."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.build
        _export(AGGA_UUID=_new_uuid(), AGGB_UUID=_new_uuid(), AGGC_UUID=_new_uuid())
        for i in (1, 2, 3):
            cn = b.provider(f"cn{i}")
            os.environ[f"CN{i}_UUID"] = cn
            b.inventory(cn, "VCPU", 24)
            b.inventory(cn, "MEMORY_MB", 128 * 1024)
            b.inventory(cn, "DISK_GB", 2000)


class CORSFixture(APIFixture):
    """The app with CORS on for one origin (``http://valid.example.com``)."""

    app_options: ClassVar[dict[str, Any]] = {
        "cors_origins": ["http://valid.example.com"],
        "cors_allow_headers": ["openstack-api-version"],
    }


class GranularFixture(APIFixture):
    """Three compute nodes (cn_left, cn_middle, cn_right) with different traits and
    classes, two sharing disk providers and one sharing network provider over three
    aggregates (aggA, aggB, aggC): Placement's granular-request topology."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.build
        catalog.create_resource_class(b.db, "CUSTOM_NET_MBPS")
        agg_a, agg_b, agg_c = _new_uuid(), _new_uuid(), _new_uuid()
        _export(AGGA=agg_a, AGGB=agg_b, AGGC=agg_c)
        left = b.provider("cn_left", agg_a)
        self._compute(
            left,
            {"DISK_GB": 500, "VGPU": 8, "SRIOV_NET_VF": 8, "CUSTOM_NET_MBPS": 4000},
            (
                "HW_CPU_X86_AVX",
                "HW_CPU_X86_AVX2",
                "HW_GPU_API_DXVA",
                "HW_NIC_DCB_PFC",
                "CUSTOM_FOO",
            ),
        )
        middle = b.provider("cn_middle", agg_a, agg_b)
        self._compute(
            middle,
            {"SRIOV_NET_VF": 8, "CUSTOM_NET_MBPS": 4000},
            ("HW_CPU_X86_AVX", "HW_CPU_X86_AVX2", "HW_CPU_X86_SSE", "HW_NIC_ACCEL_TLS"),
        )
        right = b.provider("cn_right", agg_b, agg_c)
        self._compute(
            right, {"DISK_GB": 500}, ("HW_CPU_X86_MMX", "HW_GPU_API_DXVA", "CUSTOM_DISK_SSD")
        )
        b.inventory(right, "VGPU", 8, max_unit=2)
        shr_disk_1 = b.provider("shr_disk_1", agg_a)
        b.inventory(shr_disk_1, "DISK_GB", 1000)
        b.traits(shr_disk_1, "MISC_SHARES_VIA_AGGREGATE", "CUSTOM_DISK_SSD")
        shr_disk_2 = b.provider("shr_disk_2", agg_a, agg_b)
        b.inventory(shr_disk_2, "DISK_GB", 1000)
        b.traits(shr_disk_2, "MISC_SHARES_VIA_AGGREGATE")
        shr_net = b.provider("shr_net", agg_c)
        b.inventory(shr_net, "SRIOV_NET_VF", 16)
        b.inventory(shr_net, "CUSTOM_NET_MBPS", 40000)
        b.traits(shr_net, "MISC_SHARES_VIA_AGGREGATE")
        _export(
            CN_LEFT=left,
            CN_MIDDLE=middle,
            CN_RIGHT=right,
            SHR_DISK_1=shr_disk_1,
            SHR_DISK_2=shr_disk_2,
            SHR_NET=shr_net,
        )

    def _compute(self, rp: str, extra: dict[str, int], traits: Iterable[str]) -> None:
        b = self.build
        b.inventory(rp, "VCPU", 8)
        b.inventory(rp, "MEMORY_MB", 4096)
        for rc, total in extra.items():
            b.inventory(rp, rc, total)
        b.traits(rp, *traits)


class OpenPolicyFixture(APIFixture):
    """Every policy rule open to any authenticated user (Placement sets each rule to
    ``@``): the app's ``policy="open"``."""

    app_options: ClassVar[dict[str, Any]] = {"policy": "open"}


class SecureRBACPolicyFixture(APIFixture):
    """Placement's new (secure RBAC, scope-enforcing) default policies."""

    app_options: ClassVar[dict[str, Any]] = {"policy": "secure-rbac"}


class LegacyRBACPolicyFixture(APIFixture):
    """Placement's deprecated (legacy) default policies."""

    app_options: ClassVar[dict[str, Any]] = {"policy": "legacy-rbac"}


class NeutronQoSMultiSegmentFixture(APIFixture):
    """Four compute trees with an OVS agent (packet rate) over bridges and an SR-IOV
    agent over PFs (bandwidth), on physnets: compute0 OTHER, compute1 MSN_S1, compute2
    MSN_S2, compute3 both (two bridges, two PFs) with little bandwidth."""

    _DIRECT = (
        "CUSTOM_VNIC_TYPE_DIRECT",
        "CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL",
        "CUSTOM_VNIC_TYPE_MACVTAP",
    )

    def start_fixture(self) -> None:
        super().start_fixture()
        plans = [
            ("compute0", 5000, 10000, [("br-ex", "OTHER")], [("enp129s0f0", "OTHER")]),
            ("compute1", 5000, 10000, [("br-ex", "MSN_S1")], [("enp129s0f0", "MSN_S1")]),
            ("compute2", 5000, 10000, [("br-ex", "MSN_S2")], [("enp129s0f0", "MSN_S2")]),
            (
                "compute3",
                1000,
                1000,
                [("br-ex", "MSN_S1"), ("br-ex2", "MSN_S2")],
                [("enp129s0f0", "MSN_S1"), ("enp129s0f1", "MSN_S2")],
            ),
        ]
        sriov_agents = {}
        for name, bridge_bw, pf_bw, bridges, pfs in plans:
            sriov_agents[name] = self._compute(name, bridge_bw, pf_bw, bridges, pfs)
        # Placement's fixture exports compute2's SR-IOV agent under compute3's name too.
        os.environ["compute3:sriov_agent"] = sriov_agents["compute2"]  # noqa: SIM112

    def _compute(
        self,
        name: str,
        bridge_bw: int,
        pf_bw: int,
        bridges: list[tuple[str, str]],
        pfs: list[tuple[str, str]],
    ) -> str:
        b = self.build
        cn = b.provider(name)
        os.environ[name] = cn
        b.inventory(cn, "VCPU", 8)
        b.inventory(cn, "MEMORY_MB", 4096)
        b.inventory(cn, "DISK_GB", 500)
        ovs = b.provider(f"{name}:Open vSwitch agent", parent=cn)
        os.environ[f"{name}:ovs_agent"] = ovs
        b.inventory(ovs, "NET_PACKET_RATE_KILOPACKET_PER_SEC", 1000)
        b.traits(ovs, "CUSTOM_VNIC_TYPE_NORMAL")
        for bridge, physnet in bridges:
            br = b.provider(f"{name}:Open vSwitch agent:{bridge}", parent=ovs)
            os.environ[f"{name}:{bridge.replace('-', '_')}"] = br
            b.inventory(br, "NET_BW_EGR_KILOBIT_PER_SEC", bridge_bw)
            b.inventory(br, "NET_BW_IGR_KILOBIT_PER_SEC", bridge_bw)
            b.traits(br, "CUSTOM_VNIC_TYPE_NORMAL", f"CUSTOM_PHYSNET_{physnet}")
        sriov = b.provider(f"{name}:NIC Switch agent", parent=cn)
        os.environ[f"{name}:sriov_agent"] = sriov
        b.traits(sriov, *self._DIRECT)
        for i, (dev, physnet) in enumerate(pfs):
            pf = b.provider(f"{name}:NIC Switch agent:{dev}", parent=sriov)
            os.environ[f"{name}:pf{i}"] = pf
            b.inventory(pf, "NET_BW_EGR_KILOBIT_PER_SEC", pf_bw)
            b.inventory(pf, "NET_BW_IGR_KILOBIT_PER_SEC", pf_bw)
            b.traits(pf, *self._DIRECT, f"CUSTOM_PHYSNET_{physnet}")
        return sriov


FIXTURES: tuple[type[APIFixture], ...] = (
    APIFixture,
    AllocationFixture,
    SharedStorageFixture,
    NUMAAggregateFixture,
    NUMANetworkFixture,
    DeepNUMANetworkFixture,
    NonSharedStorageFixture,
    CORSFixture,
    GranularFixture,
    OpenPolicyFixture,
    SecureRBACPolicyFixture,
    LegacyRBACPolicyFixture,
    NeutronQoSMultiSegmentFixture,
)


def for_backend(backend: str) -> types.SimpleNamespace:
    """The 13 classes, subclassed to build on ``backend``, under their own names."""
    return types.SimpleNamespace(
        **{cls.__name__: type(cls.__name__, (cls,), {"backend": backend}) for cls in FIXTURES}
    )
