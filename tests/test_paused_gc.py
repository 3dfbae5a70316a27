"""The cyclic garbage collector's pause around big answers (``paused_gc``): re-entrant,
and never paused for good while a server's requests overlap without a gap."""

from __future__ import annotations

import gc
import threading
import weakref

import orjson
import pytest

from rpquery.db import Database
from rpquery.read.candidates import _results, allocation_candidates, allocation_candidates_json
from rpquery.read.candidates._results import paused_gc
from rpquery.read.candidates._search import RawCandidate
from tests.factories import provider


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def _cyclic_garbage() -> weakref.ref[_Node]:
    return weakref.ref(_Node())


@pytest.fixture(autouse=True)
def _collector_on():  # type: ignore[no-untyped-def]
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_pause_is_reentrant_and_restores_the_collector() -> None:
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer caller is still inside
    assert gc.isenabled()


def _pause_in_another_thread() -> None:
    thread = threading.Thread(target=_pause)
    thread.start()
    thread.join()


def _pause() -> None:
    with paused_gc():
        pass


def test_overlapping_pauses_collect_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_results, "GC_PAUSE_LIMIT", 0.0)
    with paused_gc():  # a request that stays inside
        garbage = _cyclic_garbage()
        _pause_in_another_thread()  # an overlapping request leaves past the limit: it collects
        assert garbage() is None
        assert not gc.isenabled()  # the pause goes on for the one still inside
    assert gc.isenabled()


def test_a_nested_pause_does_not_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pause inside the same thread's pause (the body written while the answer is
    alive) leaves without collecting, even past the limit; the outermost then does
    while another thread is still inside."""
    monkeypatch.setattr(_results, "GC_PAUSE_LIMIT", 0.0)
    inside, leave = threading.Event(), threading.Event()

    def stay() -> None:
        with paused_gc():
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=stay)
    other.start()
    inside.wait(10)
    try:
        with paused_gc():
            garbage = _cyclic_garbage()
            with paused_gc():
                pass
            assert garbage() is not None  # nested: its caller still holds its answer
        assert garbage() is None  # outermost, the other thread inside: it collected
        assert not gc.isenabled()
    finally:
        leave.set()
        other.join()
    assert gc.isenabled()


def test_overlapping_pauses_within_it_do_not_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_results, "GC_PAUSE_LIMIT", 3600.0)
    with paused_gc():
        garbage = _cyclic_garbage()
        _pause_in_another_thread()
        assert garbage() is not None  # nothing collected while paused
    gc.collect()
    assert garbage() is None


def test_a_collector_the_caller_disabled_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_results, "GC_PAUSE_LIMIT", 0.0)
    gc.disable()
    with paused_gc():
        garbage = _cyclic_garbage()
        _pause_in_another_thread()
        assert garbage() is not None  # the application turned it off: not ours to run
    assert not gc.isenabled()
    gc.collect()
    assert garbage() is None


class _Watched:
    """``gc`` for :mod:`._results`, counting the candidates alive whenever the
    collector is turned back on."""

    def __init__(self) -> None:
        self.alive_at_enable: list[int] = []

    def enable(self) -> None:
        self.alive_at_enable.append(sum(isinstance(o, RawCandidate) for o in gc.get_objects()))
        gc.enable()

    def __getattr__(self, name: str) -> object:
        return getattr(gc, name)


def test_the_json_body_frees_the_answer_before_the_collector_is_back(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``allocation_candidates_json`` (what the API sends) turns the collector back on
    only once the answer is freed, so no collection walks its objects; an answer the
    caller holds is alive when ``allocation_candidates`` turns it back on."""
    with sqlite_db.begin() as conn:
        for i in range(30):
            host = provider(conn, f"h{i}", inventory={"DISK_GB": 100})
            for n in range(2):
                provider(conn, f"h{i}n{n}", parent=host, inventory={"VCPU": 4, "MEMORY_MB": 512})
    query = "resources=VCPU:1,MEMORY_MB:256"
    watched = _Watched()
    monkeypatch.setattr(_results, "gc", watched)
    body = allocation_candidates_json(sqlite_db, query)
    assert len(orjson.loads(body)["allocation_requests"]) == 120  # 4 a host
    assert watched.alive_at_enable == [0]
    answer = allocation_candidates(sqlite_db, query)
    assert watched.alive_at_enable[1:] == [120]
    assert answer.to_placement_json() == body
