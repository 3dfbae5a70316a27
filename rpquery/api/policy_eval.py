"""oslo.policy's ``Enforcer.authorize`` without its per-call overhead.

``Enforcer.enforce`` calls ``load_rules`` on every call (through oslo.config's
``find_file``: nine ``stat`` calls to see whether the policy file changed) and
evaluates the rule tree through ``oslo_policy._checks._check``, which runs
``inspect.getfullargspec`` on every node. On a small request that was a fifth of its
time (≈0.4 ms). Here the enforcer's loaded rule objects (oslo.policy's own, parsed by
its parser from its defaults and the operator's file) are evaluated as ``enforce``
does: the registered rule's scope types, then the rule tree, where ``or``, ``and``,
``not`` and ``rule:`` are walked here and every other check (``role:``, generic,
``http:``, plug-ins) is called as oslo.policy calls it, its signature inspected once
per class. :class:`Reloader` keeps oslo.policy's reload of a changed policy file,
throttled to one look every ``interval`` seconds (monotonic clock).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Mapping, MutableMapping
from typing import Any, cast

from oslo_policy import _checks as checks
from oslo_policy import policy as oslo

__all__ = ["Reloader", "authorize"]


class Reloader:
    """Calls ``enforcer.load_rules()`` (oslo.policy reloads the policy file and
    ``policy_dirs`` if changed) at most once every ``interval`` seconds."""

    def __init__(self, enforcer: oslo.Enforcer, interval: float) -> None:
        self.enforcer = enforcer
        self.interval = interval
        self._next = time.monotonic() + interval

    def refresh(self) -> None:
        now = time.monotonic()
        if now >= self._next:
            self.enforcer.load_rules()
            self._next = now + self.interval


def authorize(
    enforcer: oslo.Enforcer, rule: str, target: Mapping[str, Any], creds: MutableMapping[str, Any]
) -> bool:
    """``bool(enforcer.authorize(rule, target, creds))`` on the rules already loaded
    (no ``load_rules``); ``False`` where ``authorize`` would raise ``InvalidScope``."""
    registered = enforcer.registered_rules.get(rule)
    if registered is None:
        raise oslo.PolicyNotRegistered(rule)
    if creds.get("system_scope"):
        creds["system"] = creds.get("system_scope")
    if not _scope_allows(creds, registered.scope_types):
        return False
    rules = enforcer.rules
    if not rules:
        return False
    try:
        check = rules[rule]
    except KeyError:
        return False
    return bool(_evaluate(check, target, creds, enforcer, rule))


def _scope_allows(creds: Mapping[str, Any], scope_types: list[str] | None) -> bool:
    """``Enforcer._enforce_scope``: the token's scope is one of the rule's types."""
    if not scope_types:
        return True
    if creds.get("system"):
        return "system" in scope_types
    if creds.get("domain_id"):
        return "domain" in scope_types
    return "project" in scope_types


def _evaluate(
    check: checks.BaseCheck,
    target: Mapping[str, Any],
    creds: MutableMapping[str, Any],
    enforcer: oslo.Enforcer,
    current: str,
) -> Any:
    """``_checks._check(check, ...)``, the compound checks walked here (in oslo.policy's
    order, short-circuiting as it does)."""
    kind = type(check)
    if kind is checks.OrCheck:
        return any(
            _evaluate(c, target, creds, enforcer, current)
            for c in cast(checks.OrCheck, check).rules
        )
    if kind is checks.AndCheck:
        return all(
            _evaluate(c, target, creds, enforcer, current)
            for c in cast(checks.AndCheck, check).rules
        )
    if kind is checks.NotCheck:
        return not _evaluate(cast(checks.NotCheck, check).rule, target, creds, enforcer, current)
    if kind is checks.RuleCheck:
        name = cast(checks.RuleCheck, check).match
        try:  # as RuleCheck.__call__: a missing rule (or a KeyError below) fails closed
            return _evaluate(enforcer.rules[name], target, creds, enforcer, current)
        except KeyError:
            return False
    if _takes_current_rule(kind):
        return check(target, creds, enforcer, current)
    return check(target, creds, enforcer)


@functools.cache
def _takes_current_rule(kind: type) -> bool:
    """``_checks._check``'s test, once per check class: more than four arguments
    (``self, target, creds, enforcer, current_rule``) or the legacy three."""
    return len(inspect.getfullargspec(kind.__call__).args) > 4
