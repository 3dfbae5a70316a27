"""Readable text for one difference: the request, the cloud, both answers (providers
and aggregates by name), what only one side returned, and the judge's reason."""

from __future__ import annotations

import json
from typing import Any

from tests.differential.cloud import Cloud
from tests.differential.compare import canonical_candidates

MAX_LINES = 12


def describe_cloud(cloud: Cloud) -> str:
    lines = [f"cloud seed {cloud.seed}:"]
    for p in cloud.providers.values():
        inv = ", ".join(
            f"{rc} {i.total}"
            + (f" res {i.reserved}" if i.reserved else "")
            + (f" min {i.min_unit}" if i.min_unit != 1 else "")
            + (f" max {i.max_unit}" if i.max_unit != 2147483647 else "")
            + (f" step {i.step_size}" if i.step_size != 1 else "")
            + (f" x{i.ratio}" if i.ratio != "1.0" else "")
            + (f" used {cloud.used(p.name, rc)}" if cloud.used(p.name, rc) else "")
            for rc, i in p.inventory.items()
        )
        lines.append(
            f"  {p.name:<14} parent={p.parent or '-':<10} [{inv}] traits={sorted(p.traits)} "
            f"aggs={sorted(cloud.label(a) for a in p.aggs)}"
        )
    return "\n".join(lines)


def _named(cloud: Cloud, value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    for p in cloud.providers.values():
        text = text.replace(p.uuid, p.name)
    for label, agg in cloud.aggregates.items():
        text = text.replace(agg, label)
    return text


def _answer_lines(cloud: Cloud, kind: str, ours: Any, theirs: Any) -> list[str]:
    if ours.status != 200 or theirs.status != 200 or kind != "candidates":
        return [
            f"  rpquery:   {ours.status} {ours.code or ''} {_named(cloud, ours.body)[:600]}",
            f"  Placement: {theirs.status} {_named(cloud, theirs.body)[:600]}",
        ]
    mine, my_sums = canonical_candidates(ours.body)
    other, other_sums = canonical_candidates(theirs.body)
    lines = [f"  rpquery {sum(mine.values())} requests, Placement {sum(other.values())}"]
    for title, only in (("only rpquery", mine - other), ("only Placement", other - mine)):
        for key in list(only)[:MAX_LINES]:
            lines.append(f"  {title}: {_named(cloud, json.loads(key))}")
    for u in sorted(set(my_sums) | set(other_sums)):
        if my_sums.get(u) != other_sums.get(u):
            lines.append(
                f"  summary {cloud.label(u)}: rpquery {_named(cloud, my_sums.get(u))} "
                f"Placement {_named(cloud, other_sums.get(u))}"
            )
    return lines


def describe(d: Any) -> str:
    """A difference (:class:`tests.differential.run.Difference`) as text."""
    q = d.query
    title = f"EXPLAINED ({d.explained_by})" if d.explained_by else "UNEXPLAINED"
    head = (
        f"--- {title}: backend {d.backend}, cloud seed {d.cloud.seed}, request #{d.index}"
        f" ({q.kind}{', made invalid: ' + q.invalid if q.invalid else ''})"
    )
    lines = [head, f"  GET {_named(d.cloud, q.path)}", f"  why: {d.why}"]
    lines += _answer_lines(d.cloud, q.kind, d.ours, d.theirs)
    lines.append(describe_cloud(d.cloud))
    return "\n".join(lines)
