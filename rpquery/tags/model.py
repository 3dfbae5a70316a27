"""Namespaces, limits, validation and the frozen values of instance tags.

A tag belongs to one instance (a consumer uuid) and one *namespace*: who set it
(``user``, ``system``, more by configuration). Callers name the namespace; the
backend sees each tag as ``prefix + encode(tag)``, e.g. ``cyclades:user:web``.

Validation happens here, before anything touches the database:

>>> cfg = DEFAULT_CONFIG
>>> cfg.backend_form("user", "web server")
'cyclades:user:web+server'
>>> validate_tags(cfg, "user", ["b", "a", "b"])
('b', 'a')
>>> try:
...     validate_tag(cfg, "user", "a/b")
... except InvalidRequest as exc:
...     exc.code
'rpquery.tags.bad_character'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rpquery import _validation as validation
from rpquery.errors import InvalidRequest, invalid
from rpquery.tags import codec

__all__ = [
    "BACKEND_TAG_RE",
    "DEFAULT_CONFIG",
    "ConflictSkip",
    "Tag",
    "TagConfig",
    "TagStatus",
    "TagWriteResult",
    "tag_list",
    "validate_instance",
    "validate_namespace",
    "validate_tag",
    "validate_tags",
]

#: Ganeti's rule for a tag, prefix included.
BACKEND_TAG_RE = re.compile(r"^[A-Za-z0-9_.+*/:@-]+$")
_NAMESPACE_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


class TagStatus(StrEnum):
    """``PENDADD`` until the backend confirms the add, then ``ACTIVE``."""

    PENDADD = "PENDADD"
    ACTIVE = "ACTIVE"


@dataclass(frozen=True)
class TagConfig:
    """Prefixes per namespace and the limits; every operation takes one.

    >>> TagConfig(prefixes={"user": "acme:u:"}).prefixes["user"]
    'acme:u:'
    """

    prefixes: Mapping[str, str] = field(
        default_factory=lambda: {"user": "cyclades:user:", "system": "cyclades:system:"}
    )
    max_length: int = 60
    max_tags: int = 50
    backend_max_length: int = 128

    def __post_init__(self) -> None:
        for name, prefix in self.prefixes.items():
            if not _NAMESPACE_RE.fullmatch(name):
                raise ValueError(f"bad namespace name {name!r}")
            if not prefix or not BACKEND_TAG_RE.fullmatch(prefix):
                raise ValueError(f"prefix {prefix!r} breaks the backend tag rule")
        ordered = sorted(self.prefixes.values())
        for a, b in zip(ordered, ordered[1:], strict=False):
            if b.startswith(a):
                raise ValueError(f"prefix {a!r} is a prefix of {b!r}: namespaces would overlap")

    def backend_form(self, namespace: str, tag: str) -> str:
        """What the backend stores for ``tag`` in ``namespace``."""
        return self.prefixes[namespace] + codec.encode(tag)

    def parse_backend_form(self, encoded: str) -> tuple[str, str] | None:
        """``(namespace, tag)`` of a backend tag, or ``None`` when it carries none of
        our prefixes, is not a valid encoding, or decodes to a tag our own rules would
        refuse (empty, too long, ``/`` or ``,``): such tags are never adopted."""
        for name, prefix in self.prefixes.items():
            if encoded.startswith(prefix):
                try:
                    return name, validate_tag(self, name, codec.decode(encoded[len(prefix) :]))
                except InvalidRequest:
                    return None
        return None


DEFAULT_CONFIG = TagConfig()


@dataclass(frozen=True)
class Tag:
    """One stored tag as its namespace's caller sees it."""

    tag: str
    status: TagStatus


@dataclass(frozen=True)
class ConflictSkip:
    """``tag`` was not applied because ``kept``, already present, excludes it."""

    tag: str
    kept: str


@dataclass(frozen=True)
class TagWriteResult:
    """What a write did. ``tags`` is the namespace's state after the write.

    ``added``: new PENDADD rows (add jobs submitted); ``deleted``: rows removed
    (delete jobs submitted); ``unchanged``: asked-for tags already present;
    ``pending_kept``: PENDADD tags a replace/delete-all could not touch;
    ``skipped``: tags not applied because of a conflict with a present tag.
    """

    instance_uuid: str
    namespace: str
    tags: tuple[Tag, ...]
    added: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    pending_kept: tuple[str, ...] = ()
    skipped: tuple[ConflictSkip, ...] = ()
    job_ids: tuple[str, ...] = ()


# ------------------------------------------------------------------ validation


def validate_instance(instance_uuid: str) -> str:
    """The instance uuid, canonical (:func:`rpquery._validation.check_uuid`): every
    accepted form of one uuid names one tag set. ``rpquery.tags.bad_instance``."""
    return validation.check_uuid(instance_uuid, "rpquery.tags.bad_instance", "instance")


def validate_namespace(config: TagConfig, namespace: str) -> str:
    if not isinstance(namespace, str) or namespace not in config.prefixes:
        raise InvalidRequest(
            "rpquery.tags.unknown_namespace",
            f"unknown namespace {namespace!r}; known: {', '.join(sorted(config.prefixes))}",
            token=str(namespace),
        )
    return namespace


def validate_tag(config: TagConfig, namespace: str, tag: object) -> str:
    """``tag`` unchanged when acceptable in ``namespace``; ``InvalidRequest`` otherwise."""
    if not isinstance(tag, str) or not tag:
        raise InvalidRequest(
            "rpquery.tags.empty", "a tag must be a non-empty string", token=repr(tag)
        )
    if len(tag) > config.max_length:
        why = f"longer than {config.max_length} characters"
        raise invalid("rpquery.tags.too_long", f"tag {tag!r} {why}", tag)
    if "\x00" in tag:
        raise invalid("rpquery.tags.bad_character", f"tag {tag!r} contains a NUL character", tag)
    for char in "/,":
        if char in tag:
            why = f"contains {char!r}, which is not allowed"
            raise invalid("rpquery.tags.bad_character", f"tag {tag!r} {why}", tag)
    form = config.backend_form(validate_namespace(config, namespace), tag)
    if len(form) > config.backend_max_length:
        why = f"backend form is {len(form)} characters, over the backend's "
        why += str(config.backend_max_length)
        raise invalid("rpquery.tags.backend_rejects", f"tag {tag!r} {why}", tag)
    if not BACKEND_TAG_RE.fullmatch(form):  # pragma: no cover - the codec guarantees it
        why = "backend form breaks the tag alphabet"
        raise invalid("rpquery.tags.backend_rejects", f"tag {tag!r} {why}", tag)
    return tag


def validate_tags(config: TagConfig, namespace: str, tags: Iterable[str]) -> tuple[str, ...]:
    """Validated tags, duplicates dropped (first occurrence kept), at most
    ``max_tags`` of them (``rpquery.tags.too_many``); ``tags`` is a list (or any other
    iterable but a string or a mapping: ``rpquery.tags.bad_list``)."""
    out = tuple(dict.fromkeys(validate_tag(config, namespace, t) for t in tag_list(tags)))
    if len(out) > config.max_tags:
        raise InvalidRequest(
            "rpquery.tags.too_many",
            f"{len(out)} tags requested, at most {config.max_tags} per instance and namespace",
            token=out[config.max_tags],
        )
    return out


def tag_list(tags: object) -> list[object]:
    """``tags`` as a list: any iterable but a string, bytes or a mapping."""
    if isinstance(tags, str | bytes | Mapping) or not isinstance(tags, Iterable):
        raise InvalidRequest(
            "rpquery.tags.bad_list",
            f"tags must be a list of strings, got {type(tags).__name__}",
            token=repr(tags),
        )
    return list(tags)

