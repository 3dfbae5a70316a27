"""rpquery's answer to a request, and both answers in canonical (order-free) form.

Allocation requests are compared as a multiset of canonical JSON (mapping lists
sorted), provider summaries as a dict (traits sorted), provider lists as a sorted list
without ``links``; 4xx answers as "both refused", and by which error where the two
name the same kind of problem (:func:`error_kind`).

>>> canonical_candidates({"allocation_requests": [{"allocations": {"r": {"resources":
...     {"VCPU": 1}}}, "mappings": {"": ["r"]}}], "provider_summaries": {}})[1]
{}
"""

from __future__ import annotations

import json
import traceback
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rpquery.db import Database
from rpquery.errors import RpqueryError
from rpquery.read.candidates import allocation_candidates
from rpquery.read.providers import list_providers, to_placement
from rpquery.usage.reads import project_usages, render_project_usages
from tests.differential.queries import Query


@dataclass
class Answer:
    status: int
    body: Any
    code: str | None = None  # rpquery's error code, or the kind read from Placement's text
    token: str | None = None  # the offending input rpquery names


def rpquery_answer(db: Database, q: Query) -> Answer:
    """rpquery's library answer to ``q``, rendered as Placement's 1.39 body."""
    try:
        return Answer(200, _ask(db, q))
    except RpqueryError as error:
        status = 404 if "not_found" in error.code and q.kind == "usages" else 400
        return Answer(status, str(error), error.code, getattr(error, "token", None))
    except Exception:  # a crash is an answer too: it differs from Placement's
        return Answer(500, traceback.format_exc(limit=6), "crash")


def _ask(db: Database, q: Query) -> Any:
    if q.kind == "candidates":
        answer = allocation_candidates(db, q.query)
        body = answer.to_placement()
        # the API sends the one-pass JSON body: it must say what the dicts say
        if json.loads(answer.to_placement_json()) != body:
            raise AssertionError("to_placement_json() differs from to_placement()")
        return body
    if q.kind == "providers":
        return to_placement(list_providers(db, q.query))
    params = dict(q.pairs)
    report = project_usages(
        db,
        params["project_id"],
        user_id=params.get("user_id"),
        consumer_type=params.get("consumer_type"),
    )
    return render_project_usages(report)


def placement_answer(raw: dict[str, Any]) -> Answer:
    answer = Answer(int(raw["status"]), raw["body"])
    if 400 <= answer.status < 500:
        answer.code = error_kind(json.dumps(raw["body"]))
    return answer


#: Placement's error texts, by the rpquery code that names the same problem.
_KINDS = (
    ("No such trait", "rpquery.trait.not_found"),
    ("No such resource class", "rpquery.resource_class.not_found"),
    ("Invalid resource class", "rpquery.resource_class.not_found"),
    ("Unknown resource class", "rpquery.resource_class.not_found"),
    ("Conflicting required and forbidden traits", "rpquery.trait.conflict"),
)


def error_kind(text: str) -> str | None:
    """The rpquery code for Placement's error text, when one names the same problem."""
    return next((code for needle, code in _KINDS if needle in text), None)


def comparable(ours: Answer, theirs: Answer) -> bool:
    """Whether two refusals can be compared by kind (both are known kinds)."""
    known = {code for _, code in _KINDS}
    return ours.code in known and theirs.code in known


# ---------------------------------------------------------------- canonical forms


def _request_key(ar: dict[str, Any]) -> str:
    mappings = {k: sorted(v) for k, v in ar.get("mappings", {}).items()}
    return json.dumps({"allocations": ar["allocations"], "mappings": mappings}, sort_keys=True)


def canonical_candidates(body: dict[str, Any]) -> tuple[Counter[str], dict[str, Any]]:
    requests = Counter(_request_key(ar) for ar in body["allocation_requests"])
    summaries = {
        u: {**s, "traits": sorted(s.get("traits", []))}
        for u, s in body["provider_summaries"].items()
    }
    return requests, summaries


def canonical_providers(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    keys = ("uuid", "name", "generation", "root_provider_uuid", "parent_provider_uuid")
    return sorted(tuple(p.get(k) for k in keys) for p in body["resource_providers"])


def canonical(kind: str, body: Any) -> Any:
    if kind == "candidates":
        return canonical_candidates(body)
    if kind == "providers":
        return canonical_providers(body)
    return body


def same(kind: str, ours: Answer, theirs: Answer) -> bool:
    """Equal answers: both 200 with equal canonical bodies, or both refused (by the
    same kind of error where that is comparable)."""
    if ours.status == 200 and theirs.status == 200:
        return bool(canonical(kind, ours.body) == canonical(kind, theirs.body))
    if 400 <= ours.status < 500 and 400 <= theirs.status < 500:
        return not comparable(ours, theirs) or ours.code == theirs.code
    return False
