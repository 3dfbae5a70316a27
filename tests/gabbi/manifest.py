"""Reads ``manifest.yaml``: the gabbi tests expected to fail, each with its reason.

Entries are ``<yaml file>_<test name>`` as gabbi names them (the pytest id without the
backend), mapped to a reason, or to ``{reason: ..., backends: [...]}`` when only some
backends fail. Every entry becomes a strict xfail: a test that starts passing fails the
run until its entry is removed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MANIFEST = Path(__file__).with_name("manifest.yaml")

#: Placement's policy / RBAC files: the next step's target (a policy engine).
POLICY_SUFFIXES = ("-policy", "-legacy-rbac", "-secure-rbac")


def is_policy_file(suite: str) -> bool:
    return suite.endswith(POLICY_SUFFIXES)


def load(path: Path = MANIFEST) -> dict[str, dict[str, Any]]:
    """``{test name: {"reason": str, "backends": set | None}}``."""
    raw = yaml.safe_load(path.read_text()) or {}
    entries: dict[str, dict[str, Any]] = {}
    for name, value in (raw.get("expected_failures") or {}).items():
        if isinstance(value, str):
            entries[name] = {"reason": value, "backends": None}
        else:
            entries[name] = {"reason": value["reason"], "backends": set(value["backends"])}
    return entries


def reason_for(entries: dict[str, dict[str, Any]], name: str, backend: str) -> str | None:
    entry = entries.get(name)
    if entry is None or (entry["backends"] is not None and backend not in entry["backends"]):
        return None
    return str(entry["reason"])
