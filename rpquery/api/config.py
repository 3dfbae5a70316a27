"""Placement's configuration file (``placement.conf``) on oslo.config, as :class:`Settings`.

The options keep Placement 16.0's groups, names and defaults, so that the file of a
Placement deployment works unchanged::

    [DEFAULT]
    debug = false
    log_file = /var/log/placement/placement-api.log
    [api]
    auth_strategy = keystone            # or noauth2 (tests); rpquery adds "none"
    [placement_database]
    connection = mysql+pymysql://placement:secret@controller/placement
    replica_connections = ...          # rpquery's: read replicas (comma-separated)
    max_replica_lag = 5                # rpquery's: seconds a replica may lag
    [keystone_authtoken]               # handed whole to keystonemiddleware.auth_token
    [oslo_policy]                      # handed whole to oslo.policy (policy_file ...)
    [cors]                             # handed whole to oslo.middleware's CORS
    [placement]
    allocation_conflict_retry_count = 10

Files are found as Placement finds them: ``--config-file`` / ``--config-dir`` when given,
else ``$OS_PLACEMENT_CONFIG_DIR/placement.conf`` when that variable is set, else
oslo.config's default places for the project ``placement``
(``/etc/placement/placement.conf`` ...). Overrides (the command line's options) win
over the files.

Nothing in a file is ignored silently: an option rpquery does not know, a section it
does not read, and an option it reads but does not honour yet at a value other than its
default are each named in :attr:`Settings.warnings` (``rpquery serve`` logs them at
start-up). Needs oslo.config (``pip install 'rpquery[openstack]'``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oslo_config import cfg, iniparser

from rpquery.api import config_opts as opts
from rpquery.read.candidates import CandidateOptions

__all__ = ["ConfigError", "Settings", "config_files", "load"]


class ConfigError(ValueError):
    """A configuration that cannot run: the message names the option."""


@dataclass(frozen=True)
class Settings:
    """What the server and the app consume, typed; ``conf`` is the parsed
    ``ConfigOpts`` that keystonemiddleware, oslo.policy and the CORS middleware read."""

    connection: str | None
    replicas: tuple[str, ...]
    max_replica_lag: float
    sync_on_startup: bool
    auth_strategy: str
    policy: str | None
    debug: bool
    log_file: str | None
    cors_origins: tuple[str, ...]
    files: tuple[str, ...]
    warnings: tuple[str, ...]
    conf: Any = field(repr=False, compare=False)
    #: ``[placement] randomize_allocation_candidates``, ``max_allocation_candidates``,
    #: ``allocation_candidates_generation_strategy``
    candidate_options: CandidateOptions = field(default_factory=CandidateOptions)


def config_files(
    files: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> list[str] | None:
    """The files to read: ``files`` when given, else Placement's
    ``$OS_PLACEMENT_CONFIG_DIR/placement.conf``; ``None`` = oslo.config's defaults."""
    if files:
        return list(files)
    dirname = (os.environ if env is None else env).get("OS_PLACEMENT_CONFIG_DIR", "").strip()
    return [os.path.join(dirname, "placement.conf")] if dirname else None


def load(
    files: Sequence[str] = (),
    *,
    config_dirs: Sequence[str] = (),
    overrides: Mapping[tuple[str, str], Any] | None = None,
    policy: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Parse the configuration (see the module docstring); ``overrides`` maps
    ``(group, option)`` to a value that wins over the files; ``policy`` is a preset of
    :func:`rpquery.api.policy.named_policy` (``None``: the files' ``[oslo_policy]``)."""
    chosen = config_files(files, env)
    for path in chosen or ():
        if not os.path.isfile(path):
            raise ConfigError(f"configuration file {path} does not exist")
    conf = cfg.ConfigOpts()
    opts.register(conf)
    args = [a for d in config_dirs for a in ("--config-dir", d)]
    try:
        conf(args, project="placement", default_config_files=chosen, validate_default_values=True)
        for (group, name), value in (overrides or {}).items():
            if value is not None:
                conf.set_override(name, value, group)
        return _settings(conf, policy)
    except (cfg.Error, ValueError, iniparser.ParseError) as error:
        raise ConfigError(f"bad configuration: {error}") from error


def _settings(conf: cfg.ConfigOpts, policy: str | None) -> Settings:
    db = conf.placement_database
    replicas = [*db.replica_connections, *([db.slave_connection] if db.slave_connection else [])]
    read = tuple(conf.config_file) + tuple(_dir_files(conf.config_dir))
    return Settings(
        connection=_usable_url(db.connection),
        replicas=tuple(replicas),
        max_replica_lag=db.max_replica_lag,
        sync_on_startup=db.sync_on_startup,
        auth_strategy=conf.api.auth_strategy,
        policy=policy,
        debug=conf.debug,
        log_file=_log_path(conf.log_file, conf.log_dir),
        cors_origins=tuple(conf.cors.allowed_origin or ()),
        files=read,
        warnings=tuple(_warnings(conf, read)),
        conf=conf,
        candidate_options=CandidateOptions(
            randomize=bool(conf.placement.randomize_allocation_candidates),
            # (any negative value is no bound, as in Placement)
            max_candidates=max(conf.placement.max_allocation_candidates, -1),
            strategy=conf.placement.allocation_candidates_generation_strategy,
        ),
    )


#: Drivers a Placement deployment names that rpquery does not install, and the ones it
#: uses instead (same database, same URL otherwise).
_DRIVERS = {"postgresql+psycopg2": ("psycopg2", "postgresql+psycopg")}


def _usable_url(url: str | None) -> str | None:
    """``url`` with a driver rpquery has when the file names one it lacks: Placement's
    ``postgresql+psycopg2://`` becomes ``postgresql+psycopg://`` unless psycopg2 is
    installed."""
    if not url:
        return url
    import importlib.util

    scheme, sep, rest = url.partition("://")
    module, replacement = _DRIVERS.get(scheme, ("", ""))
    if module and importlib.util.find_spec(module) is None:
        return f"{replacement}{sep}{rest}"
    return url


def _dir_files(directory: str | None) -> list[str]:
    if not directory or not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".conf"))


def _log_path(log_file: str | None, log_dir: str | None) -> str | None:
    """oslo.log's rule: ``log_file`` inside ``log_dir`` when both are set."""
    if log_file and log_dir:
        return os.path.join(log_dir, log_file)
    return log_file


def _warnings(conf: cfg.ConfigOpts, files: Iterable[str]) -> list[str]:
    found: list[str] = []
    for path in files:
        for section, key in keys_in(path):
            problem = opts.unknown(conf, section, key)
            if problem:
                found.append(f"{path}: [{section}] {key}: {problem}")
    for group, name, reason in opts.UNHONOURED:
        value = conf[group][name] if group != "DEFAULT" else conf[name]
        if value != opts.default_of(conf, group, name):
            found.append(f"[{group}] {name} = {value!r}: {reason}")
    return found


class _KeyCollector(iniparser.BaseParser):
    """Every (section, key) of an ini file, in oslo.config's own syntax."""

    def __init__(self) -> None:
        super().__init__()
        self.section = "DEFAULT"
        self.keys: list[tuple[str, str]] = []

    def new_section(self, section: str) -> None:
        self.section = section

    def assignment(self, key: str, value: list[str]) -> None:
        self.keys.append((self.section, key))


def keys_in(path: str) -> list[tuple[str, str]]:
    collector = _KeyCollector()
    with open(path) as fh:
        collector.parse(fh)
    return collector.keys
