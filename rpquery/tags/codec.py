"""The one tag codec: clear-text Unicode tags ↔ the backend's restricted alphabet.

Ganeti accepts only ``[A-Za-z0-9_.+*/:@-]`` in a tag. The codec (Synnefo's
``tag_to_ganeti``) maps any Unicode tag into that alphabet:

1. encode as UTF-8;
2. ``quote_plus`` with nothing safe (space → ``+``, everything but ``A-Za-z0-9_.-~``
   → ``%XX``), and ``~`` escaped too (``%7E``), so the output never holds ``~``;
3. ``%`` → ``/`` and ``_`` → ``*``.

The output alphabet is ``A-Za-z0-9.-+*/``; ``/`` and ``*`` appear only from step 3,
so decoding reverses it unambiguously. :func:`decode` is applied exactly once, to a
form read from the backend; it refuses anything :func:`encode` could not have
produced, so a tag is never decoded twice by accident.

>>> encode("web server_1")
'web+server*1'
>>> encode("déjà~vu")
'd/C3/A9j/C3/A0/7Evu'
>>> decode(encode("ünïcode tag, 2/2"))
'ünïcode tag, 2/2'
"""

from __future__ import annotations

import re
from urllib.parse import quote_plus, unquote_plus

from rpquery.errors import InvalidRequest, invalid

__all__ = ["ENCODED_ALPHABET", "decode", "encode"]

#: Everything :func:`encode` can output (a subset of Ganeti's tag alphabet).
ENCODED_ALPHABET = re.compile(r"^[A-Za-z0-9.+*/-]*$")


def encode(tag: str) -> str:
    """The backend form of clear-text ``tag`` (without namespace prefix).

    >>> encode("a+b")
    'a/2Bb'

    Raises ``InvalidRequest`` (``rpquery.tags.not_unicode``) when ``tag`` holds
    lone surrogates, which UTF-8 cannot encode.
    """
    try:
        raw = tag.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRequest(
            "rpquery.tags.not_unicode", f"tag {tag!r} is not valid Unicode text", token=tag
        ) from exc
    quoted = quote_plus(raw, safe="").replace("~", "%7E")
    return quoted.replace("%", "/").replace("_", "*")


def decode(encoded: str) -> str:
    """The clear-text tag of a backend form produced by :func:`encode`.

    >>> decode("web+server*1")
    'web server_1'

    Raises ``InvalidRequest`` (``rpquery.tags.bad_encoding``) when ``encoded`` is not
    exactly what :func:`encode` would produce for some tag (wrong alphabet, broken
    escapes, invalid UTF-8, lower-case or needless escapes).
    """
    code, what = "rpquery.tags.bad_encoding", f"backend tag {encoded!r}"
    if not ENCODED_ALPHABET.fullmatch(encoded):
        raise invalid(code, f"{what}: characters outside the codec's alphabet", encoded)
    quoted = encoded.replace("*", "_").replace("/", "%")
    try:
        tag = unquote_plus(quoted, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise invalid(code, f"{what}: escapes are not valid UTF-8", encoded) from exc
    if encode(tag) != encoded:
        raise invalid(code, f"{what}: not the canonical encoding of any tag", encoded)
    return tag

