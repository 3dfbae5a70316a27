"""HTTP errors in Placement's shape, and the map from rpquery's error codes to them.

Handlers raise :class:`ApiError` (or let an :class:`rpquery.errors.RpqueryError`
through); the app renders either as Placement does::

    {"errors": [{"status": 404, "title": "Not Found",
                 "detail": "The resource could not be found.\\n\\n No resource provider ...  ",
                 "code": "placement.resource_provider.not_found",   # from 1.23
                 "request_id": "req-..."}]}

The ``detail`` keeps Placement's layout (a fixed explanation per status, a blank line,
the message) because clients and Placement's own tests match text in it. The message
itself is always one line (:func:`one_line`), as Placement's formatter makes it: the
OpenStack client shows only the last line of a detail, so a JSON-schema error kept on
several lines showed only the dump of the input. The message never grows with the input
either: a schema error quotes at most :data:`QUOTED` characters of it, any message is at
most :data:`rpquery.errors.DETAIL_SHOWN`, and a cut says how long the whole was. Like
Placement, the body is JSON unless the client's ``Accept`` prefers HTML (then HTML) or
excludes both (then plain text).

>>> from_rpquery(NotFound("rpquery.provider.not_found", "no provider x")).status
404
>>> from_rpquery(Conflict("rpquery.provider.duplicate", "taken")).code
'placement.duplicate_name'
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from http import HTTPStatus

from rpquery.errors import DETAIL_SHOWN, Conflict, InvalidRequest, NotFound, RpqueryError, shorten

__all__ = [
    "ApiError",
    "CONCURRENT_UPDATE",
    "DEFAULT",
    "DUPLICATE_NAME",
    "ILLEGAL_DUPLICATE_QUERYPARAM",
    "INVENTORY_INUSE",
    "PLACEMENT_CODES",
    "PROVIDER_CANNOT_DELETE_PARENT",
    "PROVIDER_IN_USE",
    "QUERYPARAM_BAD_VALUE",
    "QUERYPARAM_MISSING_VALUE",
    "QUOTED",
    "RESOURCE_PROVIDER_NOT_FOUND",
    "accept_ranges",
    "error_media_type",
    "from_rpquery",
    "one_line",
    "q_of",
    "render",
]

# Placement's error codes (placement/errors.py): the values clients dispatch on.
DEFAULT = "placement.undefined_code"
INVENTORY_INUSE = "placement.inventory.inuse"
CONCURRENT_UPDATE = "placement.concurrent_update"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
RESOURCE_PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"
ILLEGAL_DUPLICATE_QUERYPARAM = "placement.query.duplicate_key"
QUERYPARAM_BAD_VALUE = "placement.query.bad_value"
QUERYPARAM_MISSING_VALUE = "placement.query.missing_value"

#: rpquery code → Placement code, for the codes whose meaning a client checks.
PLACEMENT_CODES: Mapping[str, str] = {
    "rpquery.concurrent_update": CONCURRENT_UPDATE,
    "rpquery.provider.generation_conflict": CONCURRENT_UPDATE,
    "rpquery.consumer.generation_conflict": CONCURRENT_UPDATE,
    "rpquery.provider.duplicate": DUPLICATE_NAME,
    "rpquery.provider.in_use": PROVIDER_IN_USE,
    "rpquery.provider.has_children": PROVIDER_CANNOT_DELETE_PARENT,
    "rpquery.provider.not_found": RESOURCE_PROVIDER_NOT_FOUND,
    "rpquery.inventory.in_use": INVENTORY_INUSE,
}

# The fixed first sentence of each status's detail (as WebOb, and so Placement, words it).
_EXPLANATIONS: Mapping[int, str] = {
    400: "The server could not comply with the request since it is either malformed "
    "or otherwise incorrect.",
    401: "This server could not verify that you are authorized to access the document "
    "you requested.  Either you supplied the wrong credentials (e.g., bad password), "
    "or your browser does not understand how to supply the credentials required.",
    403: "Access was denied to this resource.",
    404: "The resource could not be found.",
    406: "The resource could not be generated that was acceptable to your browser "
    "(content of type {accept}. ",
    409: "There was a conflict when trying to complete your request.",
    415: "The request media type {content_type} is not supported by this server.",
    500: "The server has either erred or is incapable of performing the requested operation.",
    503: "The server is currently unavailable. Please try again at a later time.",
}


class ApiError(Exception):
    """An HTTP error response: ``status``, a human ``message`` and a Placement ``code``.

    ``headers`` are added to the response (``allow`` on a 405); ``extra`` fields go
    into the JSON error entry (``min_version``/``max_version`` on a 406 for an
    unsupported microversion).
    """

    def __init__(
        self,
        status: int,
        message: str = "",
        *,
        code: str = DEFAULT,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})


def from_rpquery(exc: RpqueryError) -> ApiError:
    """The HTTP error for a library error: ``InvalidRequest`` → 400, ``NotFound`` → 404,
    ``Conflict`` (and subclasses) → 409, anything else → 500; the Placement code from
    :data:`PLACEMENT_CODES` (``placement.undefined_code`` otherwise)."""
    if isinstance(exc, InvalidRequest):
        status = 400
    elif isinstance(exc, NotFound):
        status = 404
    elif isinstance(exc, Conflict):
        status = 409
    else:
        status = 500
    return ApiError(status, exc.detail, code=PLACEMENT_CODES.get(exc.code, DEFAULT))


#: Characters of the input a JSON-schema error quotes (in its message, and in the dump of
#: the failing part of the input) before cutting it.
QUOTED = 300

# jsonschema's str(ValidationError): the message, then the failing part of the schema and
# of the instance, each followed by a dump of it (pprint, several lines).
_SCHEMA_ERROR = re.compile(
    r"(?P<head>.*?)\n\n(?P<failed>Failed validating .+? in schema.*?:)\n(?P<schema>.*?)"
    r"\n\nOn (?P<where>instance.*?):\n(?P<instance>.*)",
    re.DOTALL,
)


def _flat(text: str) -> str:
    """Line breaks as Placement's error formatter leaves them (webob's ``strip_tags``):
    each ``\\n`` a space, each ``\\r`` gone."""
    return text.replace("\r", "").replace("\n", " ")


def one_line(message: str) -> str:
    """``message`` on one line and of bounded length, otherwise as Placement shows it.

    Placement's error formatter turns the line breaks of a message into spaces, so its
    JSON-schema errors come out on one line, dumps of the schema and of the input
    included; rpquery does the same. The parts that quote the input (the message and the
    dump of the failing part of the input) are cut at :data:`QUOTED` characters, any
    other message at :data:`rpquery.errors.DETAIL_SHOWN`; a cut ends with the length
    of the whole (``…(100002 chars)``).

    >>> one_line("JSON does not validate: 0 is less than the minimum of 1\\n\\n"
    ...          "Failed validating 'minimum' in schema['properties']['total']:\\n"
    ...          "    {'type': 'integer', 'minimum': 1}\\n\\nOn instance['total']:\\n    0")
    "JSON does not validate: 0 is less than the minimum of 1  Failed validating 'minimum' \
in schema['properties']['total']:     {'type': 'integer', 'minimum': 1}  On \
instance['total']:     0"
    """
    found = _SCHEMA_ERROR.fullmatch(message)
    if found is None:
        return shorten(_flat(message), DETAIL_SHOWN)
    head, where = shorten(found["head"], QUOTED), shorten(found["where"], QUOTED)
    instance = shorten(found["instance"], QUOTED)
    return _flat(f"{head}\n\n{found['failed']}\n{found['schema']}\n\nOn {where}:\n{instance}")


def title(status: int) -> str:
    return HTTPStatus(status).phrase


def detail_text(status: int, message: str, environ: Mapping[str, str]) -> str:
    """Placement's ``detail``: the explanation, a blank line, the message."""
    if status == 405:
        method = environ.get("REQUEST_METHOD", "")
        return f"The method {method} is not allowed for this resource. \n\n {message}"
    explanation = _EXPLANATIONS.get(status, "")
    explanation = explanation.format(
        accept=environ.get("HTTP_ACCEPT", ""), content_type=environ.get("CONTENT_TYPE", "")
    )
    return f"{explanation}\n\n {message}  "


def q_of(offer: str, ranges: list[tuple[str, float]]) -> float:
    """The quality the ``Accept`` ranges give ``offer`` (most specific range wins)."""
    kind = offer.split("/")[0] + "/*"
    best, rank = 0.0, -1
    for media, q in ranges:
        this = 2 if media == offer else 1 if media == kind else 0 if media == "*/*" else -1
        if this > rank:
            best, rank = q, this
    return best if rank >= 0 else 0.0


def accept_ranges(accept: str) -> list[tuple[str, float]]:
    ranges = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media:
            ranges.append((media.lower(), q))
    return ranges


def error_media_type(accept: str | None) -> str:
    """The error body's media type: JSON unless the client ranks HTML above it (then
    HTML) or accepts neither (then plain text). No ``Accept`` and ``*/*`` get JSON, as
    Placement's own tests expect (``bug-1674694.yaml``, ``basic-http.yaml``)."""
    if not accept:
        return "application/json"
    ranges = accept_ranges(accept)
    html_q, json_q = q_of("text/html", ranges), q_of("application/json", ranges)
    if max(html_q, json_q) <= 0:
        return "text/plain"
    return "text/html" if html_q > json_q else "application/json"


def render(
    error: ApiError,
    environ: Mapping[str, str],
    *,
    version: tuple[int, int] | None,
    request_id: str | None,
) -> tuple[str, bytes]:
    """``(content type, body)`` of ``error`` for the request in ``environ``."""
    detail = detail_text(error.status, one_line(error.message), environ)
    media = error_media_type(environ.get("HTTP_ACCEPT"))
    head = f"{error.status} {title(error.status)}"
    if media == "application/json":
        entry: dict[str, object] = {
            "status": error.status,
            "title": title(error.status),
            "detail": detail,
        }
        if version is not None and version >= (1, 23):
            entry["code"] = error.code
        if request_id:
            entry["request_id"] = request_id
        entry.update(error.extra)
        return media, json.dumps({"errors": [entry]}).encode()
    if media == "text/html":
        body = (
            f"<html>\n <head>\n  <title>{head}</title>\n </head>\n <body>\n  <h1>{head}</h1>\n"
            f"  {html.escape(detail)}\n </body>\n</html>"
        )
        return media + "; charset=UTF-8", body.encode()
    return media + "; charset=UTF-8", f"{head}\n\n{detail}".encode()
