"""The timing side of ``make bench-check`` (:mod:`benchmarks.check`): one process per
checkout, run as a script with that checkout first on ``PYTHONPATH`` (and
``PYTHONSAFEPATH=1``), so that it imports *that* checkout's rpquery. It imports nothing
of the ``benchmarks`` package: a baseline commit's may differ, or predate this file.

It reads one JSON object per line on stdin and answers one per line on stdout:

- ``{"op": "hello"}`` → where its rpquery comes from and whether it has the REST app;
- ``{"op": "accepts", "queries": [...]}`` → which of them its parser takes;
- ``{"op": "open", "url": ..., "shapes_url": ..., "via": "wsgi"|"library"}``;
- ``{"op": "run", "kind": ..., "reps": n, ...}`` → ``{"times": [seconds, ...]}``: one
  time per call (``candidates``: ``query``; ``usages``: ``project``; ``claims``:
  ``targets``, ``project``, ``user``, ``seed``; ``shapes``: ``queries``, each asked
  once on the shapes cloud);
- ``{"op": "quit"}``.

The virtualenv's editable install of rpquery (setuptools' finder, after the path
finder on ``sys.meta_path``) is taken off first: it would otherwise answer for a module
the checkout lacks (``rpquery.api`` in a commit from before the REST API) with the
working tree's, and mix two versions in one process.

Each entry point is looked up under today's module names first, then under the flat
names of before the layer packages (4b7f6a1), so that an older baseline runs as well.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import random
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _first(*names: str) -> Any:
    """The first of ``module:attribute`` names that imports."""
    for name in names:
        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {names}")


def _sibling(name: str) -> Any:
    """This file's sibling module ``name`` (standard library only), loaded by its path:
    the checkout first on ``sys.path`` may not have it."""
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_check_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_environ = _sibling("wsgi_environ").environ


class Worker:
    """The databases and entry points of one checkout."""

    def __init__(self) -> None:
        self.db: Any = None
        self.shapes_db: Any = None
        self.apps: dict[str, Any] = {}
        self.via = "library"

    def hello(self, _: dict[str, Any]) -> dict[str, Any]:
        import rpquery

        try:
            _first("rpquery.api:make_app")
            api = True
        except ImportError:
            api = False
        return {"rpquery": rpquery.__file__, "api": api}

    def accepts(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Which of ``queries`` this version's parser takes (a baseline may refuse a
        request shape a later version takes, or the other way round)."""
        parse = _first("rpquery.read.request:parse_candidates", "rpquery.request:parse_candidates")
        ok = []
        for query in msg["queries"]:
            try:
                parse(query)
                ok.append(True)
            except Exception:
                ok.append(False)
        return {"ok": ok}

    def open(self, msg: dict[str, Any]) -> dict[str, Any]:
        database = _first("rpquery.db:Database")
        self.db = database(msg["url"])
        self.shapes_db = database(msg["shapes_url"]) if msg.get("shapes_url") else None
        self.via = msg["via"]
        if self.via == "wsgi":
            make_app = _first("rpquery.api:make_app")
            self.apps = {"main": make_app(self.db)}
            if self.shapes_db is not None:
                self.apps["shapes"] = make_app(self.shapes_db)
        return {"ok": True}

    # ------------------------------------------------------------------ calls

    def _get(self, which: str, path: str) -> None:
        seen: list[str] = []
        chunks = self.apps[which](_environ("GET", path), lambda s, h, e=None: seen.append(s))
        try:
            body = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        if not seen or not seen[0].startswith("200"):
            raise RuntimeError(f"GET {path}: {seen[:1]} {body[:300]!r}")

    def _candidates(self, which: str, query: str) -> Callable[[], None]:
        if self.via == "wsgi":
            return lambda: self._get(which, f"/allocation_candidates?{query}")
        call = _first(
            "rpquery.read.candidates:allocation_candidates",
            "rpquery.candidates:allocation_candidates",
        )
        db = self.db if which == "main" else self.shapes_db

        def library() -> None:
            answer = call(db, query)
            body = getattr(answer, "to_placement_json", None)
            body() if body is not None else json.dumps(answer.to_placement())

        return library

    def _usages(self, project: str) -> Callable[[], None]:
        if self.via == "wsgi":
            return lambda: self._get("main", f"/usages?project_id={project}")
        call = _first("rpquery.usage.reads:project_usages", "rpquery.usages:project_usages")
        return lambda: call(self.db, project)

    def _claim(self, msg: dict[str, Any]) -> Callable[[], None]:
        model = _first("rpquery.models:ConsumerAllocations")
        write = _first(
            "rpquery.write.allocations:replace_allocations",
            "rpquery.allocations:replace_allocations",
        )
        rng = random.Random(msg["seed"])
        targets, project, user = msg["targets"], msg["project"], msg["user"]

        def claim() -> None:
            rp = rng.choice(targets)
            alloc = {rp: {"VCPU": 1, "MEMORY_MB": 256}}
            write(self.db, model(str(uuid.uuid4()), project, user, "INSTANCE", None, alloc))

        return claim

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        kind = msg["kind"]
        if kind == "shapes":
            calls = [self._candidates("shapes", q) for q in msg["queries"]]
        else:
            if kind == "candidates":
                call = self._candidates("main", msg["query"])
            elif kind == "usages":
                call = self._usages(msg["project"])
            elif kind == "claims":
                call = self._claim(msg)
            else:
                raise ValueError(f"unknown kind {kind!r}")
            calls = [call] * msg["reps"]
        times = []
        for call in calls:
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        return {"times": times}


def _checkout_only() -> None:
    """Only ``PYTHONPATH``'s rpquery: no editable-install finder (see the module doc)."""
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in f.__module__]


def main() -> int:
    _checkout_only()
    worker = Worker()
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["op"] == "quit":
            break
        try:
            out = getattr(worker, msg["op"])(msg)
        except Exception as error:  # reported to the controller, which stops
            out = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
