"""Output formats of every listing command, with the OpenStack client's conventions.

``-f table|json|yaml|csv|value``, ``-c COLUMN`` (repeatable), ``--noindent`` (JSON),
``--sort-column COLUMN`` (repeatable) with ``--sort-ascending``/``--sort-descending``.
A command describes its answer once, as a :class:`Listing` (columns and rows) or, for
one object, as fields (:meth:`Output.show`); this module prints it in the chosen
format, with the same column names in every format::

    $ rpquery providers -f csv -c name -c generation --sort-column name
    "name","generation"
    "cn000000",2

``--json`` (the flag every command had before ``-f``) still prints the command's whole
answer as one JSON document — Placement's body where the command mirrors an API call —
so scripts written against it keep working; ``-f json`` prints the rows.

A cell is a plain value (str, int, float, bool, None) or a :class:`Cell`, whose text is
shown by ``table``, ``csv`` and ``value`` and whose data by ``json`` and ``yaml`` (a
candidate's allocations: ``cn1: VCPU:2`` as text, ``{"<uuid>": {"VCPU": 2}}`` as data).

The table (rich) is imported only when a table is printed; YAML is written here (flat
rows of scalars, lists and mappings: no dependency, nothing to import at start-up). The
value types are named tuples, not dataclasses: ``rpquery --help`` imports this module
(``db status`` has its options) and nothing more for it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import click

from rpquery.errors import InvalidRequest

__all__ = [
    "FORMATS",
    "Cell",
    "Listing",
    "Output",
    "output_options",
    "to_yaml",
]

FORMATS = ("table", "json", "yaml", "csv", "value")


class Cell(NamedTuple):
    """A value shown as ``text`` by table/csv/value and as ``data`` by json/yaml."""

    text: str
    data: Any

    def __str__(self) -> str:
        return self.text


class Listing(NamedTuple):
    """A command's answer as rows. ``title`` and ``notes`` (lines after the table) are
    printed by the table format only: the other formats carry the rows alone."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    title: str = ""
    notes: Sequence[str] = ()


class Output(NamedTuple):
    """What the output options asked for (see the module docstring)."""

    fmt: str = "table"
    columns: tuple[str, ...] = ()
    noindent: bool = False
    sort_columns: tuple[str, ...] = ()
    descending: bool = False
    document: bool = False

    @property
    def json_errors(self) -> bool:
        """Errors go to stderr as JSON too (``--json``, ``-f json``)."""
        return self.document or self.fmt == "json"

    @property
    def is_table(self) -> bool:
        return self.fmt == "table" and not self.document

    def emit(self, listing: Listing, document: Callable[[], Any] | None = None) -> None:
        """Print ``listing`` in the chosen format; ``--json`` prints ``document()``."""
        if self.document and document is not None:
            emit_document(document(), self.noindent)
            return
        columns, rows = select(listing, self.columns, self.sort_columns, self.descending)
        if self.is_table:
            print_table(listing.title, columns, rows)
            for note in listing.notes:
                click.echo(note)
        elif self.fmt in ("json", "yaml", "table"):  # table: --json without a document
            self._print_json([dict(zip(columns, _data(r), strict=True)) for r in rows])
        elif self.fmt == "csv":
            print_csv(columns, rows)
        else:
            for row in rows:
                click.echo(" ".join(_text(v) for v in row))

    def show(
        self,
        fields: Mapping[str, Any],
        title: str = "",
        document: Callable[[], Any] | None = None,
    ) -> None:
        """One object: a Field/Value table, a JSON/YAML mapping, a CSV header and row,
        or its values one per line (``value``)."""
        if self.document and document is not None:
            emit_document(document(), self.noindent)
            return
        one = Listing(list(fields), [list(fields.values())])
        columns, rows = select(one, self.columns, (), False)
        values = rows[0]
        if self.is_table:
            pairs = [[c, v] for c, v in zip(columns, values, strict=True)]
            print_table(title, ["Field", "Value"], pairs)
        elif self.fmt in ("json", "yaml", "table"):
            self._print_json(dict(zip(columns, _data(values), strict=True)))
        elif self.fmt == "csv":
            print_csv(columns, rows)
        else:
            for value in values:
                click.echo(_text(value))

    def _print_json(self, data: Any) -> None:
        if self.fmt == "yaml":
            click.echo(to_yaml(data), nl=False)
        else:
            emit_document(data, self.noindent, sort_keys=False)


def emit_document(data: Any, noindent: bool = False, *, sort_keys: bool = True) -> None:
    """JSON on stdout: indented by 2, or on one line (``--noindent``); a document's keys
    sorted (as ``--json`` always printed them), a row's in column order."""
    indent = None if noindent else 2
    click.echo(json.dumps(data, indent=indent, sort_keys=sort_keys, default=str))


# ---------------------------------------------------------------- rows


def select(
    listing: Listing, wanted: Sequence[str], sort_by: Sequence[str], descending: bool
) -> tuple[list[str], list[list[Any]]]:
    """The columns ``-c`` asked for (all by default, in the listing's order) and the rows
    sorted by ``--sort-column`` (stable; ``None`` first). An unknown name is an
    ``InvalidRequest`` ``rpquery.cli.unknown_column`` that lists the known ones.

    >>> select(Listing(["a", "b"], [[2, "x"], [1, "y"]]), ["b"], ["a"], False)
    (['b'], [['y'], ['x']])
    """
    names = list(listing.columns)
    for name in (*wanted, *sort_by):
        if name not in names:
            raise InvalidRequest(
                "rpquery.cli.unknown_column",
                f"no column {name!r}; the columns are: {', '.join(names)}",
                token=name,
            )
    rows = [list(row) for row in listing.rows]
    for name in reversed(sort_by):
        rows.sort(key=functools.partial(_key_of, names.index(name)), reverse=descending)
    keep = [names.index(n) for n in wanted] if wanted else list(range(len(names)))
    return [names[i] for i in keep], [[row[i] for i in keep] for row in rows]


def _key_of(at: int, row: Sequence[Any]) -> tuple[int, Any]:
    return _sort_key(row[at])


def _sort_key(value: Any) -> tuple[int, Any]:
    value = value.data if isinstance(value, Cell) else value
    if value is None:
        return (0, 0)
    if isinstance(value, bool | int | float):
        return (1, value)
    return (2, str(value))


def _data(row: Iterable[Any]) -> list[Any]:
    return [v.data if isinstance(v, Cell) else v for v in row]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A readable table (rich): numeric columns right-aligned, ``(none)`` when empty."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title or None)
    for i, col in enumerate(columns):
        numeric = bool(rows) and all(
            isinstance(row[i], int | float) and not isinstance(row[i], bool)
            for row in rows
            if row[i] is not None
        )
        table.add_column(col, justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*(_text(v) for v in row))
    if not table.row_count:
        table.caption = "(none)"
    Console(width=160).print(table)


def print_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A header line, then one line per row; text quoted, numbers not (the OpenStack
    client's ``--quote nonnumeric``)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_value(v) for v in row])
    click.echo(buffer.getvalue(), nl=False)


def _csv_value(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, Cell):
        return _text(value)
    return value


# ---------------------------------------------------------------- YAML

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]*")
#: Characters a YAML reader refuses raw or takes for a line break: written escaped.
_NOT_RAW = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff\ufffe\uffff]")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _scalar(value: Any) -> str:
    """One YAML scalar; a string is written plain only when no YAML reader could take
    it for anything else, otherwise double-quoted (JSON's escapes are YAML's too)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        mantissa, e, exponent = repr(value).partition("e")
        if "." not in mantissa:  # YAML 1.1 readers want the dot: 1.0e-05, not 1e-05
            mantissa += ".0"
        return mantissa + e + exponent
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    quoted = json.dumps(text, ensure_ascii=False)
    return _NOT_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _yaml_lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, Mapping) and value:
        lines = []
        for key, item in value.items():
            if _is_block(item):
                lines.append(f"{pad}{_scalar(key)}:")
                lines.extend(_yaml_lines(item, indent + 2))
            else:
                lines.append(f"{pad}{_scalar(key)}: {_inline(item)}")
        return lines
    if isinstance(value, list | tuple) and value:
        lines = []
        for item in value:
            if _is_block(item):
                inner = _yaml_lines(item, indent + 2)
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines.extend(inner[1:])
            else:
                lines.append(f"{pad}- {_inline(item)}")
        return lines
    return [pad + _inline(value)]


def _is_block(value: Any) -> bool:
    return isinstance(value, Mapping | list | tuple) and bool(value)


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return _scalar(value)


def to_yaml(value: Any) -> str:
    """``value`` (mappings, lists, scalars) as a YAML document in block style, keys in
    their order.

    >>> print(to_yaml([{"name": "cn1", "uuid": "0f3c", "total": 8, "traits": []}]), end="")
    - name: cn1
      uuid: "0f3c"
      total: 8
      traits: []
    """
    return "\n".join(_yaml_lines(value, 0)) + "\n"


# ---------------------------------------------------------------- options


def output_options(fn: Callable[..., Any] | None = None, *, listing: bool = True) -> Any:
    """Give a command the output options; its callback receives ``out: Output``.

    ``listing=False`` (a command that shows one object) leaves out the sort options.
    ``--json`` with ``-f`` other than json, ``-c`` or a sort column is a usage error:
    it prints the whole document, which has no columns.
    """
    if fn is None:
        return functools.partial(output_options, listing=listing)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = Output(
            fmt=kwargs.pop("output_format"),
            columns=tuple(kwargs.pop("output_columns")),
            noindent=kwargs.pop("noindent"),
            sort_columns=tuple(kwargs.pop("sort_columns", ())),
            descending=not kwargs.pop("sort_ascending", True),
            document=kwargs.pop("as_json"),
        )
        if out.document and (out.fmt not in ("table", "json") or out.columns or out.sort_columns):
            raise click.UsageError(
                "--json prints the whole answer as one document; "
                "use -f json with -c / --sort-column to choose rows and columns"
            )
        return fn(*args, out=out, **kwargs)

    command: Callable[..., Any] = wrapper
    for option in reversed(_options(listing)):
        command = option(command)
    return command


def _options(listing: bool) -> list[Callable[..., Any]]:
    """The click options of :func:`output_options`."""
    options = [
        click.option(
            "-f",
            "--format",
            "output_format",
            type=click.Choice(FORMATS),
            default="table",
            show_default=True,
            help="Output format.",
        ),
        click.option(
            "-c",
            "--column",
            "output_columns",
            multiple=True,
            metavar="COLUMN",
            help="Only this column (repeatable; the table's column names).",
        ),
        click.option("--noindent", is_flag=True, help="JSON on one line."),
    ]
    if listing:
        options += [
            click.option(
                "--sort-column",
                "sort_columns",
                multiple=True,
                metavar="COLUMN",
                help="Sort the rows by this column (repeatable: the first decides first).",
            ),
            click.option(
                "--sort-ascending/--sort-descending",
                "sort_ascending",
                default=True,
                help="Sort order of --sort-column.",
            ),
        ]
    options.append(
        click.option(
            "--json",
            "as_json",
            is_flag=True,
            help="The whole answer as one JSON document (Placement's body where the "
            "command mirrors an API call).",
        )
    )
    return options
