"""Pure planning of tag writes: given the namespace's current tags, the request and
the conflict rules, decide what to add, delete, keep and skip. No database here, so
every rule (limits, conflicts, "only ACTIVE tags change") is testable in isolation.

>>> from rpquery.tags.model import DEFAULT_CONFIG, TagStatus
>>> now = {"web": TagStatus.ACTIVE, "db": TagStatus.PENDADD, "old": TagStatus.ACTIVE}
>>> p = plan_set(now, ("web", "new"), frozenset(), DEFAULT_CONFIG, replace=True)
>>> p.add, p.delete, p.unchanged, p.pending_kept
(('new',), ('old',), ('web',), ('db',))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rpquery.errors import Conflict, InvalidRequest, NotFound
from rpquery.tags.conflicts import Rules
from rpquery.tags.model import ConflictSkip, TagConfig, TagStatus

__all__ = ["Plan", "plan_delete_all", "plan_delete_one", "plan_set"]


@dataclass(frozen=True)
class Plan:
    """What one write will do to one (instance, namespace)."""

    add: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    pending_kept: tuple[str, ...] = ()
    skipped: tuple[ConflictSkip, ...] = ()


def plan_set(
    current: Mapping[str, TagStatus],
    requested: Sequence[str],
    rules: Rules,
    config: TagConfig,
    *,
    replace: bool,
) -> Plan:
    """Add ``requested`` (``replace=False``) or make it the new set (``replace=True``).

    Replace deletes ACTIVE tags not requested and keeps PENDADD ones (only ACTIVE
    tags change). A new tag excluded by a tag that stays is skipped; two new tags
    excluding each other reject the request (``rpquery.tags.conflicting_tags``).
    The result may hold at most ``config.max_tags`` tags, but re-adding a present
    tag is never an error (``rpquery.tags.limit_reached``).
    """
    wanted = set(requested)
    delete = tuple(
        t for t, s in current.items() if replace and s is TagStatus.ACTIVE and t not in wanted
    )
    pending_kept = tuple(
        t for t, s in current.items() if replace and s is TagStatus.PENDADD and t not in wanted
    )
    staying = set(current) - set(delete)
    unchanged = tuple(t for t in requested if t in current)
    new = [t for t in requested if t not in current]
    skipped: list[ConflictSkip] = []
    for tag in list(new):
        kept = _partner_in(rules, tag, staying)
        if kept is not None:
            skipped.append(ConflictSkip(tag, kept))
            new.remove(tag)
    for tag in new:
        other = _partner_in(rules, tag, set(new) - {tag})
        if other is not None:
            raise InvalidRequest(
                "rpquery.tags.conflicting_tags",
                f"tags {tag!r} and {other!r} exclude each other; request at most one",
                token=tag,
            )
    if new and len(staying) + len(new) > config.max_tags:
        raise Conflict(
            "rpquery.tags.limit_reached",
            f"at most {config.max_tags} tags per instance and namespace; "
            f"{len(staying)} present, {len(new)} new",
            token=new[0],
        )
    return Plan(tuple(new), delete, unchanged, pending_kept, tuple(skipped))


def plan_delete_one(current: Mapping[str, TagStatus], tag: str) -> Plan:
    """Delete one ACTIVE tag: absent → ``rpquery.tags.not_found``, PENDADD →
    ``rpquery.tags.not_active``."""
    status = current.get(tag)
    if status is None:
        raise NotFound("rpquery.tags.not_found", f"tag {tag!r} is not set", token=tag)
    if status is not TagStatus.ACTIVE:
        raise Conflict(
            "rpquery.tags.not_active",
            f"tag {tag!r} is {status}; only ACTIVE tags can be deleted",
            token=tag,
        )
    return Plan(delete=(tag,))


def plan_delete_all(current: Mapping[str, TagStatus]) -> Plan:
    """Delete every ACTIVE tag; PENDADD ones stay."""
    return Plan(
        delete=tuple(t for t, s in current.items() if s is TagStatus.ACTIVE),
        pending_kept=tuple(t for t, s in current.items() if s is TagStatus.PENDADD),
    )


def _partner_in(rules: Rules, tag: str, others: set[str]) -> str | None:
    for other in sorted(others):
        if frozenset((tag, other)) in rules:
            return other
    return None
