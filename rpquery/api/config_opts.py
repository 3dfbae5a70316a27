"""The options of ``placement.conf`` rpquery registers, and what it says of the others.

Placement 16.0's own options keep their names, types and defaults (its
``placement/conf/*.py``); the libraries' groups (``[oslo_policy]``, ``[cors]``, oslo.log's
options in ``[DEFAULT]``) are registered from the libraries themselves, and
``[keystone_authtoken]`` belongs to keystonemiddleware, which registers its options
(and its auth plugin's) when the middleware starts.
"""

from __future__ import annotations

from typing import Any

from oslo_config import cfg
from oslo_log import log as oslo_log
from oslo_middleware import cors
from oslo_policy import opts as policy_opts

__all__ = ["UNHONOURED", "default_of", "register", "unknown"]

_INCOMPLETE = "00000000-0000-0000-0000-000000000000"

_API = [
    cfg.StrOpt(
        "auth_strategy",
        default="keystone",
        choices=("keystone", "noauth2", "none"),
        deprecated_group="DEFAULT",
        help="keystone: keystonemiddleware.auth_token; noauth2: Placement's test "
        "strategy; none (rpquery's): every caller is admin (a trusted proxy in front).",
    ),
]
_DATABASE = [
    cfg.StrOpt("connection", secret=True, help="SQLAlchemy URL of Placement's database."),
    cfg.StrOpt("connection_parameters", default=""),
    cfg.BoolOpt("sqlite_synchronous", default=True),
    cfg.StrOpt("slave_connection", secret=True, help="A read replica (rpquery honours it)."),
    cfg.StrOpt("mysql_sql_mode", default="TRADITIONAL"),
    cfg.IntOpt("connection_recycle_time", default=3600),
    cfg.IntOpt("max_pool_size"),
    cfg.IntOpt("max_retries", default=10),
    cfg.IntOpt("retry_interval", default=10),
    cfg.IntOpt("max_overflow"),
    cfg.IntOpt("connection_debug", default=0),
    cfg.BoolOpt("connection_trace", default=False),
    cfg.IntOpt("pool_timeout"),
    cfg.BoolOpt("sync_on_startup", default=False),
    cfg.ListOpt(
        "replica_connections",
        default=[],
        secret=True,
        help="rpquery: read replicas' URLs; reads go there while they are up and fresh.",
    ),
    cfg.FloatOpt(
        "max_replica_lag",
        default=5.0,
        min=0,
        help="rpquery: seconds a replica may lag before reads go to the primary.",
    ),
]
_PLACEMENT = [
    cfg.BoolOpt("randomize_allocation_candidates", default=False),
    cfg.StrOpt("incomplete_consumer_project_id", default=_INCOMPLETE),
    cfg.StrOpt("incomplete_consumer_user_id", default=_INCOMPLETE),
    cfg.IntOpt("allocation_conflict_retry_count", default=10),
    cfg.IntOpt("max_allocation_candidates", default=-1),
    cfg.StrOpt(
        "allocation_candidates_generation_strategy",
        default="depth-first",
        choices=("depth-first", "breadth-first"),
    ),
]
_WORKAROUNDS = [cfg.BoolOpt("optimize_for_wide_provider_trees", default=False)]
_DEFAULT = [
    cfg.StrOpt("tempdir"),
    cfg.StrOpt("pybasedir"),
    cfg.StrOpt("state_path"),
    cfg.BoolOpt("log_options", default=True),
]

#: Options rpquery reads but honours only at their default, with the reason; a start-up
#: warning names each one set to anything else.
UNHONOURED: tuple[tuple[str, str, str], ...] = (
    ("placement", "allocation_conflict_retry_count",
     "not honoured: rpquery retries generation conflicts with its own backoff"),
    ("placement", "incomplete_consumer_project_id",
     "not honoured: rpquery gives incomplete consumers Placement's default id"),
    ("placement", "incomplete_consumer_user_id",
     "not honoured: rpquery gives incomplete consumers Placement's default id"),
    ("workarounds", "optimize_for_wide_provider_trees",
     "not honoured: rpquery's summaries cover only the returned trees already"),
    ("placement_database", "connection_parameters",
     "not honoured: put driver parameters in the connection URL's query"),
    ("placement_database", "sqlite_synchronous",
     "not honoured: rpquery sets SQLite's pragmas itself"),
    ("placement_database", "mysql_sql_mode", "not honoured: rpquery sets its own sql_mode"),
    ("placement_database", "connection_recycle_time",
     "not honoured: rpquery pings connections instead"),
    ("placement_database", "max_pool_size", "not honoured: rpquery sizes its pool itself"),
    ("placement_database", "max_overflow", "not honoured: rpquery sizes its pool itself"),
    ("placement_database", "pool_timeout", "not honoured: rpquery sizes its pool itself"),
    ("placement_database", "max_retries",
     "not honoured: rpquery retries reads and writes on lost connections itself"),
    ("placement_database", "retry_interval",
     "not honoured: rpquery retries reads and writes on lost connections itself"),
    ("placement_database", "connection_debug",
     "not honoured: use rpquery's --log-level debug"),
    ("placement_database", "connection_trace", "not honoured"),
) + tuple(
    ("DEFAULT", name, "not honoured: rpquery honours debug, log_file and log_dir of oslo.log")
    for name in (
        "log_config_append", "use_syslog", "use_journal", "use_json", "use_stderr",
        "log_rotation_type", "logging_context_format_string", "default_log_levels",
        "publish_errors",
    )
)

#: The sections rpquery hands whole to a library (which checks its own options).
_PASSED_WHOLE = {"keystone_authtoken": "keystonemiddleware.auth_token"}
_OWN_GROUPS = {
    "api": _API,
    "placement_database": _DATABASE,
    "placement": _PLACEMENT,
    "workarounds": _WORKAROUNDS,
}
#: What a file may say that no library of this release reads any more.
_GONE = {
    ("oslo_policy", "enforce_scope"): (
        "not an option of oslo.policy 6.0 (Placement 16.0's): scope types are always "
        "enforced"
    ),
}


def register(conf: cfg.ConfigOpts) -> None:
    """Placement's options, oslo.log's, oslo.policy's and oslo.middleware CORS's (with
    Placement's CORS defaults) on ``conf``."""
    for group, options in _OWN_GROUPS.items():
        conf.register_opts(options, group=group)
    conf.register_opts(_DEFAULT)
    oslo_log.register_options(conf)
    policy_opts.set_defaults(conf, "policy.yaml")
    conf.register_opts(cors.CORS_OPTS, "cors")
    cors.set_defaults(
        allow_headers=["X-Auth-Token", "X-Openstack-Request-Id", "X-Identity-Status",
                       "X-Roles", "X-Service-Catalog", "X-User-Id", "X-Tenant-Id",
                       "OpenStack-API-Version"],
        expose_headers=["X-Auth-Token", "X-Openstack-Request-Id", "X-Subject-Token",
                        "X-Service-Token", "OpenStack-API-Version"],
        allow_methods=["GET", "PUT", "POST", "DELETE", "PATCH"],
    )


def _names(conf: cfg.ConfigOpts, group: str) -> set[str]:
    """The names (deprecated ones too, dashes as underscores) of ``group``'s options."""
    found: set[str] = set()
    opts = conf._groups[group]._opts if group != "DEFAULT" else conf._opts  # noqa: SLF001
    for info in opts.values():
        opt = info["opt"]
        found.add(opt.dest)
        found.update(
            (d.name or opt.dest).replace("-", "_")
            for d in opt.deprecated_opts
            if (d.group or group) in (group, "DEFAULT")
        )
    return found


def unknown(conf: cfg.ConfigOpts, section: str, key: str) -> str | None:
    """Why ``[section] key`` of a file is not read, or ``None`` when it is."""
    key = key.replace("-", "_")
    if section in _PASSED_WHOLE:
        return None
    if (section, key) in _GONE:
        return _GONE[(section, key)]
    if section != "DEFAULT" and section not in conf._groups:  # noqa: SLF001
        return f"rpquery does not read the section [{section}]; ignored"
    if key not in _names(conf, section):
        return "not an option rpquery or its libraries know; ignored"
    return None


def default_of(conf: cfg.ConfigOpts, group: str, name: str) -> Any:
    """The registered default of an option (after ``set_defaults``)."""
    opts = conf._groups[group]._opts if group != "DEFAULT" else conf._opts  # noqa: SLF001
    return opts[name]["opt"].default
