"""Every example of the aggregate instance type filter's document (docs/design.md#origins),
verbatim, as data.

Each example names flavors (extra specs) and aggregates (metadata) exactly as the
document writes them, and says which aggregates each flavor may be booted in. The pure
tests (``test_extra_specs.py``) and the database tests (``test_aggregate_metadata.py``)
both run these, so the two levels cannot drift apart.

Where the document lists a flavor but no aggregates (use case 1), or states an outcome
"without force_metadata_check" in prose (use case 4), the aggregates are added here and
marked in ``note``.
"""

from __future__ import annotations

from dataclasses import dataclass

FMC = "force_metadata_check"


@dataclass(frozen=True)
class Example:
    name: str
    flavors: dict[str, dict[str, str]]
    aggregates: dict[str, dict[str, str]]
    #: flavor name → aggregates whose hosts pass
    passes: dict[str, set[str]]
    note: str = ""


F1_F3 = {"flavor 1": {"key": "1"}, "flavor 2": {"key": "2"}, "flavor 3": {}}

EXAMPLES = [
    Example(
        "opening",
        {
            "flavor 1": {"key": "~"},
            "flavor 2": {"key": "<or> * <or> ~"},
            "flavor 3": {"key": "*"},
            "flavor 4": {},
        },
        {
            "aggregate 1": {"key": "1", FMC: "False"},
            "aggregate 2": {},
            "aggregate 3": {"other key": "1", FMC: "False"},
        },
        {
            "flavor 1": {"aggregate 2", "aggregate 3"},
            "flavor 2": {"aggregate 1", "aggregate 2", "aggregate 3"},
            "flavor 3": {"aggregate 1"},
            "flavor 4": {"aggregate 1", "aggregate 2", "aggregate 3"},
        },
    ),
    Example(
        "use case 1",
        {"flavor": {"key": "*"}},
        {"aggregate 1": {"key": "1"}, "aggregate 2": {"key": "any"}, "aggregate 3": {}},
        {"flavor": {"aggregate 1", "aggregate 2"}},
        note="the document gives no aggregates: one per value plus one without the key",
    ),
    Example(
        "use case 2",
        {"flavor": {"key": "<or> 1 <or> ~"}},
        {"aggregate 1": {"key": "1"}, "aggregate 2": {"key": "2"}, "aggregate 3": {}},
        {"flavor": {"aggregate 1", "aggregate 3"}},
    ),
    Example(
        "use case 3",
        {"flavor": {"key": "!"}},
        {"aggregate 1": {"key": "1"}, "aggregate 2": {}},
        {"flavor": {"aggregate 2"}},
    ),
    Example(
        "use case 4",
        F1_F3,
        {"aggregate": {"key": "1", FMC: "True"}},
        {"flavor 1": {"aggregate"}, "flavor 2": set(), "flavor 3": set()},
    ),
    Example(
        "use case 4 without force_metadata_check",
        F1_F3,
        {"aggregate": {"key": "1"}},
        {"flavor 1": {"aggregate"}, "flavor 2": set(), "flavor 3": {"aggregate"}},
        note="the prose sentence 'without the key ... flavor 3 will allow the use of hosts'",
    ),
    Example(
        "use case 5, first example",
        F1_F3,
        {"aggregate": {"key": "*", FMC: "True"}},
        {"flavor 1": {"aggregate"}, "flavor 2": {"aggregate"}, "flavor 3": set()},
    ),
    Example(
        "use case 5, second example",
        {**F1_F3, "flavor 4": {"key": "*", "key2": "2"}},
        {"aggregate": {"key": "*"}},
        {"flavor 1": set(), "flavor 2": set(), "flavor 3": {"aggregate"}, "flavor 4": set()},
    ),
    Example(
        "use case 5, third example",
        F1_F3,
        {"aggregate": {"key": "!", FMC: "True"}},
        {"flavor 1": set(), "flavor 2": set(), "flavor 3": {"aggregate"}},
    ),
    Example(
        "use case 6, first example",
        {**F1_F3, "flavor 3": {"key": "<or> 2 <or> 3"}, "flavor 4": {}},
        {"aggregate": {"key": "<or> 1 <or> 2", FMC: "True"}},
        {
            "flavor 1": {"aggregate"},
            "flavor 2": {"aggregate"},
            "flavor 3": {"aggregate"},
            "flavor 4": set(),
        },
    ),
    Example(
        "use case 6, second example",
        {
            **F1_F3,
            "flavor 3": {"key": "<or> 2 <or> 3"},
            "flavor 4": {},
            "flavor 5": {"key": "<or> 1 <or> 2"},
        },
        {"aggregate": {"key": "<or> 1 <or> 2"}},
        {
            "flavor 1": set(),
            "flavor 2": set(),
            "flavor 3": set(),
            "flavor 4": {"aggregate"},
            "flavor 5": set(),
        },
        note="'no flavor will pass' read as 'no flavor that sets the key' (issue 7)",
    ),
    Example(
        "use case 7",
        {"flavor": {"hw:cpu_policy": "shared"}},
        {
            "aggregate 1": {"hw:cpu_policy": "shared"},
            "aggregate 2": {"hw:cpu_policy": "dedicated"},
            "aggregate 3": {},
        },
        {"flavor": {"aggregate 1", "aggregate 3"}},
    ),
]


def cases() -> list[tuple[Example, str]]:
    """(example, flavor name) pairs, for parametrizing."""
    return [(ex, flavor) for ex in EXAMPLES for flavor in ex.flavors]
