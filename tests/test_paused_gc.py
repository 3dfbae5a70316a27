"""The cyclic garbage collector's pause around big answers (``paused_gc``): re-entrant,
and never paused for good while a server's requests overlap without a gap."""

from __future__ import annotations

import gc
import weakref

import pytest

from rpquery.read.candidates import _results
from rpquery.read.candidates._results import paused_gc


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


def test_overlapping_pauses_collect_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_results, "GC_PAUSE_LIMIT", 0.0)
    with paused_gc():  # a request that stays inside (another thread, in a server)
        garbage = _cyclic_garbage()
        with paused_gc():
            pass  # the overlapping request leaves past the limit: it collects
        assert garbage() is None
        assert not gc.isenabled()  # the pause goes on for the one still inside
    assert gc.isenabled()


def test_overlapping_pauses_within_it_do_not_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_results, "GC_PAUSE_LIMIT", 3600.0)
    with paused_gc():
        garbage = _cyclic_garbage()
        with paused_gc():
            pass
        assert garbage() is not None  # nothing collected while paused
    gc.collect()
    assert garbage() is None


def test_a_collector_the_caller_disabled_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_results, "GC_PAUSE_LIMIT", 0.0)
    gc.disable()
    with paused_gc():
        garbage = _cyclic_garbage()
        with paused_gc():
            pass
        assert garbage() is not None  # the application turned it off: not ours to run
    assert not gc.isenabled()
    gc.collect()
    assert garbage() is None
