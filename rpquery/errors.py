"""One exception tree for rpquery, with stable string codes.

Every error rpquery raises is an :class:`RpqueryError`. Callers (an API layer, the
CLI) dispatch on the class or on ``code``, a stable dotted string such as
``rpquery.trait.not_found``; they never need to parse ``detail``. There are no HTTP
types here: the API layer maps classes to status codes (``InvalidRequest`` → 400,
``NotFound`` → 404, ``Conflict`` and its subclasses → 409, ``TooComplex`` → 400).

Driver errors never escape: :mod:`rpquery.db` wraps them in :class:`DatabaseError`
(or :class:`ConcurrentUpdate` for deadlocks and serialization failures), chained with
``from`` so the original traceback is kept.

>>> try:
...     raise InvalidRequest("rpquery.trait.bad_name", "bad trait name", token="lower")
... except RpqueryError as exc:
...     (exc.code, exc.token)
('rpquery.trait.bad_name', 'lower')
"""

from __future__ import annotations

__all__ = [
    "DETAIL_SHOWN",
    "TOKEN_SHOWN",
    "CapacityExceeded",
    "ConcurrentUpdate",
    "Conflict",
    "DatabaseError",
    "InUse",
    "InvalidRequest",
    "NotFound",
    "RpqueryError",
    "SchemaError",
    "TooComplex",
    "invalid",
    "readable_detail",
    "shorten",
]

#: Characters of an offending token a message shows before cutting it.
TOKEN_SHOWN = 64
#: Longest detail kept whole; a longer one is cut the same way.
DETAIL_SHOWN = 1024


def shorten(text: str, limit: int = TOKEN_SHOWN) -> str:
    """``text`` when at most ``limit`` characters, else its start and its length.

    >>> shorten("CUSTOM_" + "A" * 100_000, 10)
    'CUSTOM_AAA…(100007 chars)'
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text)} chars)"


def readable_detail(detail: str, token: str | None) -> str:
    """``detail`` with a long ``token`` (quoted or bare) cut by :func:`shorten`, and the
    whole detail cut if it is still too long to read.

    >>> readable_detail(f"bad trait {'X' * 500!r}", "X" * 500)
    "bad trait 'XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX'…(500 chars)"
    """
    if token and len(token) > TOKEN_SHOWN:
        cut = f"…({len(token)} chars)"
        detail = detail.replace(repr(token), repr(token[:TOKEN_SHOWN]) + cut)
        detail = detail.replace(token, token[:TOKEN_SHOWN] + cut)
    return shorten(detail, DETAIL_SHOWN)


class RpqueryError(Exception):
    """Base of every rpquery error: a stable ``code`` and a human ``detail``.

    ``token`` is the offending input exactly as given; ``detail`` shows it cut to a
    readable length (:func:`readable_detail`), so a 100 KB name gives a short message.
    """

    default_code = "rpquery.error"

    def __init__(self, code: str | None = None, detail: str = "", *, token: str | None = None):
        self.code = code or self.default_code
        self.detail = readable_detail(detail or self.code, token)
        self.token = token
        super().__init__(self.detail)

    def __str__(self) -> str:
        return f"{self.detail} ({self.code})"

    def as_dict(self) -> dict[str, str]:
        """The error in the shape of one entry of Placement's ``errors`` list."""
        return {"code": self.code, "detail": self.detail}


class InvalidRequest(RpqueryError):
    """Bad input: malformed syntax, unknown names, out-of-range values.

    Raised before anything reaches the database. ``token`` names the offending
    piece of input when there is one.
    """

    default_code = "rpquery.invalid_request"


def invalid(code: str, detail: str, token: object) -> InvalidRequest:
    """The one factory of input errors: ``InvalidRequest(code, detail)`` whose token is
    ``token`` itself when a string, else its ``repr`` (a value of the wrong type, as an
    API layer may pass a JSON value straight through).

    >>> invalid("rpquery.request.bad_limit", "limit must be an integer", 1.5).token
    '1.5'
    """
    return InvalidRequest(code, detail, token=token if isinstance(token, str) else repr(token))


class NotFound(RpqueryError):
    """A named object (provider, consumer, resource class, ...) does not exist."""

    default_code = "rpquery.not_found"


class Conflict(RpqueryError):
    """The request is well formed but conflicts with the current state."""

    default_code = "rpquery.conflict"


class ConcurrentUpdate(Conflict):
    """A generation check failed, or the database reported a deadlock or
    serialization failure: someone else changed the object first. Re-read and retry.
    Also a Galera node outside the primary component refusing the statement (nothing
    was written; the retry runs on another connection).

    A consumer's generation check that failed carries its data: ``consumer`` (uuid),
    ``expected_generation`` (what the caller gave; ``None``: a new consumer) and
    ``actual_generation`` (the database's; ``None``: no such consumer). ``consumer`` is
    ``None`` when the error is not (or not only) such a check.

    A single provider's generation check carries ``provider`` (uuid) with the same two
    generations (``actual_generation`` ``None`` when the row changed after it was read,
    so its new value is not known). ``provider`` is ``None`` when the check covered many
    providers at once (an allocation write) or was not a provider's.

    >>> e = ConcurrentUpdate("rpquery.consumer.generation_conflict", "stale", token="c",
    ...                      consumer="c", expected_generation=1, actual_generation=2)
    >>> e.consumer, e.provider, e.expected_generation, e.actual_generation
    ('c', None, 1, 2)
    """

    default_code = "rpquery.concurrent_update"

    def __init__(
        self,
        code: str | None = None,
        detail: str = "",
        *,
        token: str | None = None,
        consumer: str | None = None,
        provider: str | None = None,
        expected_generation: int | None = None,
        actual_generation: int | None = None,
    ):
        super().__init__(code, detail, token=token)
        self.consumer = consumer
        self.provider = provider
        self.expected_generation = expected_generation
        self.actual_generation = actual_generation


class CapacityExceeded(Conflict):
    """An allocation does not fit the provider's capacity or unit constraints:
    ``provider`` (uuid) and ``resource_class`` say which inventory (``None`` when not
    known).

    >>> e = CapacityExceeded("rpquery.allocation.capacity_exceeded", "full", token="VCPU",
    ...                      provider="rp-1", resource_class="VCPU")
    >>> e.provider, e.resource_class
    ('rp-1', 'VCPU')
    """

    default_code = "rpquery.capacity_exceeded"

    def __init__(
        self,
        code: str | None = None,
        detail: str = "",
        *,
        token: str | None = None,
        provider: str | None = None,
        resource_class: str | None = None,
    ):
        super().__init__(code, detail, token=token)
        self.provider = provider
        self.resource_class = resource_class


class InUse(Conflict):
    """The object cannot be removed or shrunk because something still uses it."""

    default_code = "rpquery.in_use"


class SchemaError(RpqueryError):
    """The database schema is missing, out of date, or not one rpquery can upgrade."""

    default_code = "rpquery.schema"


class TooComplex(RpqueryError):
    """A well-formed request whose answer would cost more work than allowed (the
    allocation-candidate search's step budget): narrow it (``limit``, fewer or more
    specific groups) or raise the budget. Nothing was written; retrying the same
    request with the same budget fails the same way."""

    default_code = "rpquery.too_complex"


class DatabaseError(RpqueryError):
    """A driver or server error that is not the caller's fault; the original
    exception is chained as ``__cause__``."""

    default_code = "rpquery.db.error"
