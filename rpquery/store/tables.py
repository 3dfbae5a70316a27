"""Every table rpquery reads or writes, on one ``MetaData``.

The first part mirrors OpenStack Placement's schema at alembic head ``a082b8bb98d0``
(``placement/db/sqlalchemy/models.py``) column for column, with Placement's own
constraint and index names, so rpquery can read and write a database Placement created
and Placement can run against one rpquery created.

The second part holds rpquery's own tables (prefix ``rpq_``). Placement never reads
them, so adding them cannot break a Placement reader.

The migrations in ``schema/`` are tested to produce exactly this metadata on every
backend (``tests/test_migrations.py``).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Unicode,
    UniqueConstraint,
    text,
)

from rpquery.store.dialects import ExactText

__all__ = [
    "CUSTOM_RC_MIN_ID",
    "NAMING_CONVENTION",
    "PLACEMENT_HEAD",
    "PLACEMENT_TABLES",
    "RPQUERY_TABLES",
    "aggregate_metadata",
    "allocations",
    "consumer_counts",
    "consumer_types",
    "consumers",
    "fake_backend_jobs",
    "fake_backend_tags",
    "instance_tag_conflicts",
    "instance_tag_jobs",
    "instance_tag_locks",
    "instance_tags",
    "inventories",
    "metadata",
    "placement_aggregates",
    "projects",
    "provider_usages",
    "resource_classes",
    "resource_provider_aggregates",
    "resource_provider_traits",
    "resource_providers",
    "server_group_members",
    "server_groups",
    "traits",
    "usage_totals",
    "users",
    "utcnow",
]

NAMING_CONVENTION = {
    # Matches what PostgreSQL would name these itself, so a database created by
    # Placement's migrations and one created by rpquery's look the same.
    "pk": "%(table_name)s_pkey",
    "fk": "%(table_name)s_%(column_0_name)s_fkey",
    "uq": "uniq_%(table_name)s0%(column_0_N_name)s",
    "ix": "%(table_name)s_%(column_0_N_name)s_idx",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

#: Placement's own alembic revision at the schema this module mirrors.
PLACEMENT_HEAD = "a082b8bb98d0"

#: Custom resource classes get ids from here on (Placement's rule).
CUSTOM_RC_MIN_ID = 10000


def utcnow() -> dt.datetime:
    """Naive UTC timestamp, as Placement's ``TimestampMixin`` stores it."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _timestamps() -> list[Column]:
    return [
        Column("created_at", DateTime, nullable=True, default=utcnow),
        Column("updated_at", DateTime, nullable=True, onupdate=utcnow),
    ]


# --------------------------------------------------------------------------
# Placement's tables (names, types, constraints and indexes as Placement's)
# --------------------------------------------------------------------------

resource_classes = Table(
    "resource_classes",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("name", String(255), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("name", name="uniq_resource_classes0name"),
)

resource_providers = Table(
    "resource_providers",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("uuid", String(36), nullable=False),
    Column("name", Unicode(200), nullable=True),
    Column("generation", Integer, nullable=True, default=0),
    Column("root_provider_id", Integer, nullable=True),
    Column("parent_provider_id", Integer, nullable=True),
    PrimaryKeyConstraint("id"),
    ForeignKeyConstraint(["parent_provider_id"], ["resource_providers.id"]),
    ForeignKeyConstraint(["root_provider_id"], ["resource_providers.id"]),
    UniqueConstraint("name", name="uniq_resource_providers0name"),
    UniqueConstraint("uuid", name="uniq_resource_providers0uuid"),
    Index("resource_providers_parent_provider_id_idx", "parent_provider_id"),
    Index("resource_providers_root_provider_id_idx", "root_provider_id"),
)

inventories = Table(
    "inventories",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("resource_provider_id", Integer, nullable=False),
    Column("resource_class_id", Integer, nullable=False),
    Column("total", Integer, nullable=False),
    Column("reserved", Integer, nullable=False),
    Column("min_unit", Integer, nullable=False),
    Column("max_unit", Integer, nullable=False),
    Column("step_size", Integer, nullable=False),
    Column("allocation_ratio", Float, nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint(
        "resource_provider_id",
        "resource_class_id",
        name="uniq_inventories0resource_provider_resource_class",
    ),
    Index("inventories_resource_class_id_idx", "resource_class_id"),
)

allocations = Table(
    "allocations",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("resource_provider_id", Integer, nullable=False),
    Column("consumer_id", String(36), nullable=False),
    Column("resource_class_id", Integer, nullable=False),
    Column("used", Integer, nullable=False),
    PrimaryKeyConstraint("id"),
    Index(
        "allocations_resource_provider_class_used_idx",
        "resource_provider_id",
        "resource_class_id",
        "used",
    ),
    Index("allocations_resource_class_id_idx", "resource_class_id"),
    Index("allocations_consumer_id_idx", "consumer_id"),
)

consumer_types = Table(
    "consumer_types",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False, autoincrement=True),
    Column("name", Unicode(255), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("name", name="uniq_consumer_types0name"),
)

consumers = Table(
    "consumers",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False, autoincrement=True),
    Column("uuid", String(36), nullable=False),
    Column("project_id", Integer, nullable=False),
    Column("user_id", Integer, nullable=False),
    Column("generation", Integer, nullable=False, server_default=text("0"), default=0),
    Column(
        "consumer_type_id",
        Integer,
        ForeignKey("consumer_types.id", name="consumers_consumer_type_id_fkey"),
        nullable=True,
    ),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("uuid", name="uniq_consumers0uuid"),
    Index("consumers_project_id_uuid_idx", "project_id", "uuid"),
    Index("consumers_project_id_user_id_uuid_idx", "project_id", "user_id", "uuid"),
    Index("consumers_consumer_type_id_idx", "consumer_type_id"),
)

projects = Table(
    "projects",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False, autoincrement=True),
    Column("external_id", String(255), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("external_id", name="uniq_projects0external_id"),
)

users = Table(
    "users",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False, autoincrement=True),
    Column("external_id", String(255), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("external_id", name="uniq_users0external_id"),
)

traits = Table(
    "traits",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False, autoincrement=True),
    Column("name", Unicode(255), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("name", name="uniq_traits0name"),
)

resource_provider_traits = Table(
    "resource_provider_traits",
    metadata,
    *_timestamps(),
    Column("trait_id", Integer, nullable=False),
    Column("resource_provider_id", Integer, nullable=False),
    PrimaryKeyConstraint("trait_id", "resource_provider_id"),
    ForeignKeyConstraint(["resource_provider_id"], ["resource_providers.id"]),
    ForeignKeyConstraint(["trait_id"], ["traits.id"]),
    Index(
        "resource_provider_traits_resource_provider_trait_idx",
        "resource_provider_id",
        "trait_id",
    ),
)

placement_aggregates = Table(
    "placement_aggregates",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False, autoincrement=True),
    Column("uuid", String(36), nullable=True),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("uuid", name="uniq_placement_aggregates0uuid"),
)

resource_provider_aggregates = Table(
    "resource_provider_aggregates",
    metadata,
    *_timestamps(),
    Column("resource_provider_id", Integer, nullable=False, autoincrement=False),
    Column("aggregate_id", Integer, nullable=False, autoincrement=False),
    PrimaryKeyConstraint("resource_provider_id", "aggregate_id"),
    Index("resource_provider_aggregates_aggregate_id_idx", "aggregate_id"),
)

#: The tables Placement's own migrations create, in creation order.
PLACEMENT_TABLES = (
    resource_classes,
    resource_providers,
    inventories,
    allocations,
    consumer_types,
    consumers,
    projects,
    users,
    traits,
    resource_provider_traits,
    placement_aggregates,
    resource_provider_aggregates,
)


# --------------------------------------------------------------------------
# rpquery's own tables (migrations rpq0002 onwards); Placement never reads them
# --------------------------------------------------------------------------

# Aggregate metadata for the flavor filter (docs/aggregate-metadata.md), keyed by
# aggregate uuid. Keys and values compare byte for byte on MariaDB too (NO PAD binary
# collation), so "Key" and "key" are two keys on every backend and NOT EXISTS pushed
# into SQL stays exact.
aggregate_metadata = Table(
    "rpq_aggregate_metadata",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("aggregate_uuid", String(36), nullable=False),
    Column("key", ExactText(255), nullable=False),
    Column("value", ExactText(255), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("aggregate_uuid", "key"),
    Index(None, "key"),
)

# Server groups (docs/server-groups.md): exactly one policy per group.
server_groups = Table(
    "rpq_server_groups",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("uuid", String(36), nullable=False),
    Column("name", String(255), nullable=False),
    Column("project_id", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("policy", String(32), nullable=False),
    Column("max_server_per_host", Integer, nullable=True),
    # Bumped on every membership change: schedulers of one group detect each other.
    Column("generation", Integer, nullable=False, server_default=text("0"), default=0),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("uuid"),
)

server_group_members = Table(
    "rpq_server_group_members",
    metadata,
    *_timestamps(),
    Column("group_id", Integer, nullable=False),
    Column("instance_uuid", String(36), nullable=False),
    PrimaryKeyConstraint("group_id", "instance_uuid"),
    ForeignKeyConstraint(["group_id"], ["rpq_server_groups.id"], ondelete="CASCADE"),
    UniqueConstraint("instance_uuid"),
)


# Instance tags (docs/tags.md): namespace in its own column, status PENDADD or ACTIVE.
# Tags compare byte for byte everywhere: on MariaDB a NO PAD binary collation, so
# "Web", "web" and "web " are three tags as they are on the backend.
def _exact_text(length: int) -> ExactText:
    return ExactText(length)


instance_tags = Table(
    "rpq_instance_tags",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("instance_uuid", String(36), nullable=False),
    Column("namespace", String(32), nullable=False),
    Column("tag", _exact_text(60), nullable=False),
    Column("status", String(16), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("instance_uuid", "namespace", "tag"),
    Index(None, "namespace", "tag"),
)

# One row per (instance, namespace) ever written: tag writes lock it (by bumping
# `version`, rpq0008) so limit and conflict checks see a stable set, backend jobs go out
# in commit order, and two writers on two Galera nodes conflict at certification.
instance_tag_locks = Table(
    "rpq_instance_tag_locks",
    metadata,
    *_timestamps(),
    Column("instance_uuid", String(36), nullable=False),
    Column("namespace", String(32), nullable=False),
    Column("version", Integer, nullable=False, server_default=text("0"), default=0),
    PrimaryKeyConstraint("instance_uuid", "namespace"),
)

# Backend jobs in flight, one row per (job, tag); removed when the outcome is applied.
instance_tag_jobs = Table(
    "rpq_instance_tag_jobs",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("job_id", String(64), nullable=False),
    Column("instance_uuid", String(36), nullable=False),
    Column("namespace", String(32), nullable=False),
    Column("tag", _exact_text(60), nullable=False),
    Column("op", String(8), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("job_id", "namespace", "tag"),
    Index(None, "instance_uuid", "namespace", "tag"),
)

# Mutually exclusive tags per namespace, stored once per pair with tag_a < tag_b.
instance_tag_conflicts = Table(
    "rpq_instance_tag_conflicts",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("namespace", String(32), nullable=False),
    Column("tag_a", _exact_text(60), nullable=False),
    Column("tag_b", _exact_text(60), nullable=False),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("namespace", "tag_a", "tag_b"),
)

# State of the database-backed fake tag backend (CLI demos): its tags in encoded form
# and its jobs (queued, or finished with an outcome not yet collected).
fake_backend_tags = Table(
    "rpq_fake_backend_tags",
    metadata,
    *_timestamps(),
    Column("instance_uuid", String(36), nullable=False),
    Column("tag", _exact_text(128), nullable=False),
    PrimaryKeyConstraint("instance_uuid", "tag"),
)

fake_backend_jobs = Table(
    "rpq_fake_backend_jobs",
    metadata,
    *_timestamps(),
    Column("id", Integer, nullable=False),
    Column("job_id", String(64), nullable=False),
    Column("instance_uuid", String(36), nullable=False),
    Column("op", String(8), nullable=False),
    Column("tag", _exact_text(128), nullable=False),
    Column("status", String(16), nullable=False),
    PrimaryKeyConstraint("id"),
)

# rpquery's own indexes on Placement's tables (migration rpq0005). Extra indexes never
# break a Placement reader; their ``rpq_`` prefix says whose they are.

# Usages by consumer type (rpquery.usage.reads): the project's consumers with their type,
# then their allocations, both answered from the index alone.
Index(
    "rpq_consumers_project_user_type_idx",
    consumers.c.project_id,
    consumers.c.user_id,
    consumers.c.consumer_type_id,
    consumers.c.uuid,
    consumers.c.id,
)
Index(
    "rpq_allocations_consumer_class_used_idx",
    allocations.c.consumer_id,
    allocations.c.resource_class_id,
    allocations.c.used,
)

# The candidates' group statement (rpquery.read.candidates): every inventory column its
# capacity check reads, so the inventory side never visits the table (rpq0009 on SQLite,
# rpq0010 on PostgreSQL and MariaDB/MySQL).
Index(
    "rpq_inventories_capacity_idx",
    inventories.c.resource_provider_id,
    inventories.c.resource_class_id,
    inventories.c.total,
    inventories.c.reserved,
    inventories.c.allocation_ratio,
    inventories.c.min_unit,
    inventories.c.max_unit,
    inventories.c.step_size,
)

# Usage summary (migration rpq0006), kept exact by triggers on ``allocations`` and
# ``consumers`` whoever writes (rpquery, the generator, Placement itself). Keys are
# Placement's ids; ``type_key`` is ``COALESCE(consumer_type_id, 0)`` (0 = no type).
# Rows whose counts fall to 0 stay until a rebuild; readers skip them. See
# docs/usages.md and rpquery.usage_summary.
usage_totals = Table(
    "rpq_usage_totals",
    metadata,
    Column("project_id", Integer, nullable=False, autoincrement=False),
    Column("user_id", Integer, nullable=False, autoincrement=False),
    Column("type_key", Integer, nullable=False, autoincrement=False),
    Column("resource_class_id", Integer, nullable=False, autoincrement=False),
    Column("used", BigInteger, nullable=False),
    # allocation rows summed into ``used``: 0 means the row is empty
    Column("allocation_count", Integer, nullable=False),
    PrimaryKeyConstraint("project_id", "user_id", "type_key", "resource_class_id"),
)

# Consumers of a (project, user, type) holding at least one allocation row.
consumer_counts = Table(
    "rpq_consumer_counts",
    metadata,
    Column("project_id", Integer, nullable=False, autoincrement=False),
    Column("user_id", Integer, nullable=False, autoincrement=False),
    Column("type_key", Integer, nullable=False, autoincrement=False),
    Column("consumer_count", Integer, nullable=False),
    PrimaryKeyConstraint("project_id", "user_id", "type_key"),
)

# Usage per (provider, class) (migration rpq0007): SUM(allocations.used), kept exact by
# triggers on ``allocations`` whoever writes. The read path joins it instead of
# aggregating ``allocations``; the write path does not read it. Rows at 0 may stay.
# See docs/read-path.md and rpquery.provider_usage. On SQLite the table is its primary
# key's B-tree (WITHOUT ROWID, rpq0009): a lookup reads ``used`` without a second seek.
provider_usages = Table(
    "rpq_provider_usages",
    metadata,
    Column("resource_provider_id", Integer, nullable=False, autoincrement=False),
    Column("resource_class_id", Integer, nullable=False, autoincrement=False),
    Column("used", BigInteger, nullable=False),
    PrimaryKeyConstraint("resource_provider_id", "resource_class_id"),
    sqlite_with_rowid=False,
)

#: rpquery's own tables, in creation order.
RPQUERY_TABLES = (
    aggregate_metadata,
    server_groups,
    server_group_members,
    instance_tags,
    instance_tag_locks,
    instance_tag_jobs,
    instance_tag_conflicts,
    fake_backend_tags,
    fake_backend_jobs,
    usage_totals,
    consumer_counts,
    provider_usages,
)
