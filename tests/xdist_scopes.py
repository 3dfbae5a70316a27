"""How ``make test`` (``-n 2 --dist loadgroup``) shares the tests between its pytest-xdist
workers: each test is a unit of work of its own, sent to whichever worker is free, except
the tests that must run in one worker, which go together and in order:

- a gabbi YAML file's tests (``tests/gabbi/test_gabbi.py``): its fixtures start with its
  first test and each test builds on the ones before;
- the modules in :data:`ONE_WORKER_MODULES`, whose tests share something costly a worker
  starts once (a cluster, Keystone).

``tests/conftest.py`` hands pytest-xdist :class:`Scheduling` (``pytest_xdist_make_scheduler``):
the groups are found from the test ids, on the controller, which sees no markers.
pytest-xdist 3.8's own ``xdist_group`` marker does nothing under pytest 9.2: the worker
appends the group to ``item._nodeid``, which ``Node.nodeid`` no longer reads.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

GABBI = "tests/gabbi/test_gabbi.py"
#: Modules whose tests run in one worker, and why.
ONE_WORKER_MODULES = {
    "tests/test_galera.py": "a 3-node Galera cluster per module",
    "tests/test_replicas.py": "a PostgreSQL primary and hot standby per module",
    "tests/test_keystone_dropin.py": "Keystone per session (~20 s to set up)",
}


def scope_of(nodeid: str) -> str | None:
    """The group a test id belongs to, or None for a test that is a unit of its own."""
    path, _, rest = nodeid.partition("::")
    if path in ONE_WORKER_MODULES:
        return path
    name = rest.partition("[")[2]
    if path == GABBI and ":" in name:  # test_gabbi[gabbi-<backend>:<yaml file>_<test>]
        return name.split("_", 1)[0]
    return None


class Scheduling(LoadGroupScheduling):
    """pytest-xdist's ``loadgroup`` scheduling with the groups of :func:`scope_of`."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid) or super()._split_scope(nodeid)
