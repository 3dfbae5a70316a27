"""The summarised providers' trait ids cached between requests, per engine (a
:class:`~rpquery.db.Database`'s primary and each of its replicas).

Placement changes a provider's traits only together with its generation
(``_set_traits`` ends with ``increment_generation``; rpquery's
:func:`~rpquery.write.associations.set_provider_traits` claims the generation; a
trait in use is never deleted; a deleted provider's rows go with it). So a provider's
trait ids are a fact of its ``(id, uuid, generation, created_at)``: the uuid and the
creation time (as text) tell a provider re-created under a reused id apart (SQLite
reuses the highest rowid once deleted; a re-created provider may keep its uuid and
reach the same generation). The summaries statement reads those with each provider
(:func:`~._summary_sql.summary_stmt` ``keyed``) and, when the cache is warm, not the
trait ids: the cache gives them, and the few it misses come from one small statement
by id (:func:`~._summary_sql.summary_traits_of`, at most :data:`MISSES_MAX`);
otherwise the statement reads them as before and fills the cache
(:func:`~._summaries.fetch_summaries`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Engine

#: At most this many providers' entries per engine (emptied when full): a 5,000-host
#: cloud has 11,063 providers
CACHE_SIZE = 65536
#: A warm read whose cache misses more providers than this reads every trait id with
#: the summaries statement again (no longer list of ids sent)
MISSES_MAX = 100
#: After a read that missed more than :data:`MISSES_MAX`, this many reads at most go
#: straight to the statement with trait ids (doubling from 1 on each such read in a row)
BACKOFF_MAX = 16

#: (uuid, generation, creation time as text, trait id text) by provider id
Entry = tuple[str, int, Any, str | None]


class TraitCache:
    """One engine's providers' trait id texts (``"12,7,30"`` as the summaries
    statement writes them, ``None`` without traits) by provider, each with the key
    it holds for. Thread-safe: entries are replaced under a lock, looked up without
    one (a full cache is replaced by an empty one, never emptied under a reader)."""

    __slots__ = ("_entries", "_lock", "_skip", "_backoff")

    def __init__(self) -> None:
        self._entries: dict[int, Entry] = {}
        self._lock = threading.Lock()
        self._skip = 0  # reads left to go straight to the trait ids (a back-off)
        self._backoff = 0

    def try_warm(self, at_least: int) -> bool:
        """Whether a read of ``at_least`` providers should try the cache (else: read
        trait ids, fill it); never while it is empty or holds too few entries to serve
        that read, nor for the reads of a back-off (:meth:`fill` ``missed``)."""
        held = len(self._entries)
        if not held or held + MISSES_MAX < at_least:
            return False
        with self._lock:
            if self._skip:
                self._skip -= 1
                return False
            return True

    def lookup(self, columns: Sequence[Sequence[Any]]) -> tuple[list[str | None], list[int]]:
        """Each provider's trait id text from the cache, and the positions of those it
        misses. ``columns``: the summaries statement's ``(ids, uuids, names, parents,
        roots, generations, creation times, ...)``."""
        get = self._entries.get
        texts: list[str | None] = []
        misses: list[int] = []
        keys = zip(columns[0], columns[1], columns[5], columns[6], strict=True)
        for i, (rp_id, uuid, generation, created) in enumerate(keys):
            entry = get(rp_id)
            if (
                entry is not None
                and entry[1] == generation
                and entry[0] == uuid
                and entry[2] == created
            ):
                texts.append(entry[3])
            else:
                texts.append(None)
                misses.append(i)
        return texts, misses

    def fill(self, columns: Sequence[Sequence[Any]], *, missed: bool = False) -> None:
        """Store providers given as five columns: ids, uuids, generations, creation
        times, trait id texts (stored in C, ``zip``: a whole cloud's 11k providers
        without a Python loop); ``missed``: the read that got them missed more than
        :data:`MISSES_MAX` (back off)."""
        ids, uuids, generations, created, texts = columns
        with self._lock:
            entries = self._entries
            if len(entries) + len(ids) > CACHE_SIZE:
                entries = self._entries = {}
            entries.update(
                zip(ids, zip(uuids, generations, created, texts, strict=True), strict=True)
            )
            if missed:
                self._backoff = min(2 * self._backoff or 1, BACKOFF_MAX)
                self._skip = self._backoff

    def served(self) -> None:
        """A warm read was served (misses within :data:`MISSES_MAX`): no back-off."""
        self._backoff = 0

    def __len__(self) -> int:
        return len(self._entries)


_CACHES: weakref.WeakKeyDictionary[Engine, TraitCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def trait_cache(engine: Engine) -> TraitCache:
    """``engine``'s cache (made on first use, gone with the engine)."""
    found = _CACHES.get(engine)
    if found is None:
        with _CACHES_LOCK:
            found = _CACHES.get(engine)
            if found is None:
                found = _CACHES[engine] = TraitCache()
    return found


def forget(engine: Engine) -> None:
    """Drop ``engine``'s cache: the next read starts cold (after its database was
    emptied or replaced under the process, as the test fixtures do)."""
    with _CACHES_LOCK:
        _CACHES.pop(engine, None)
