"""Instance tags (docs/tags.md): namespaces by setter, backend job states, one codec,
mutually exclusive tags, reconciliation with the backend, listing instances by tags.

The public API, re-exported here::

    from rpquery import tags
    tags.add_tag(db, backend, instance_uuid, "web", namespace="user")
    tags.process_outcomes(db, backend)        # PENDADD → ACTIVE
    tags.list_instances(db, tags.parse_filter(tags="web"))

See ``docs/tags.md``.
"""

from rpquery.tags.backend import (
    FakeBackend,
    JobOp,
    JobOutcome,
    TagBackend,
    TagBackendError,
    TagJob,
)
from rpquery.tags.conflicts import ConflictRule, list_conflicts, set_conflicts
from rpquery.tags.model import (
    DEFAULT_CONFIG,
    ConflictSkip,
    Tag,
    TagConfig,
    TagStatus,
    TagWriteResult,
)
from rpquery.tags.outcomes import OutcomeReport, TagChange, apply_outcomes, process_outcomes
from rpquery.tags.query import TagFilter, list_instances, parse_filter
from rpquery.tags.reconcile import ReconcileReport, reconcile
from rpquery.tags.store import (
    add_tag,
    check_tag,
    create_tags,
    delete_all_tags,
    delete_tag,
    list_tags,
    replace_tags,
)

__all__ = [
    "DEFAULT_CONFIG",
    "ConflictRule",
    "ConflictSkip",
    "FakeBackend",
    "JobOp",
    "JobOutcome",
    "OutcomeReport",
    "ReconcileReport",
    "Tag",
    "TagBackend",
    "TagBackendError",
    "TagChange",
    "TagConfig",
    "TagFilter",
    "TagJob",
    "TagStatus",
    "TagWriteResult",
    "add_tag",
    "apply_outcomes",
    "check_tag",
    "create_tags",
    "delete_all_tags",
    "delete_tag",
    "list_conflicts",
    "list_instances",
    "list_tags",
    "parse_filter",
    "process_outcomes",
    "reconcile",
    "replace_tags",
    "set_conflicts",
]
