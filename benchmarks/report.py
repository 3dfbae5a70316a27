"""Turn ``records.json`` into ``results.json``, ``report.md``, PNG plots and a short table.

The report compares each (backend, size, scenario) median with a baseline
``results.json`` when one is given, and lists every flagged full scan with the index
that would serve.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import platform
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmarks import explain, http_view, split
from benchmarks.config import RunConfig

Key = tuple[str, int, str]
LIMIT10 = "candidates_forbidden_trait_limit10"


def _key(r: dict[str, Any]) -> Key:
    return (r["backend"], int(r["hosts"]), r["scenario"])


def find_baseline(results_dir: Path, current: Path, scale: str) -> Path | None:
    """The newest earlier ``results.json`` of the same scale (the example run last)."""
    runs = sorted(
        (p for p in results_dir.glob("*/results.json") if p.parent != current),
        key=lambda p: (p.parent.name != "example", p.parent.name),
        reverse=True,
    )
    for path in runs:
        try:
            if json.loads(path.read_text())["meta"]["scale"] == scale:
                return path
        except (ValueError, KeyError):
            continue
    return None


def all_ok(out: Path) -> bool:
    data = _records(out)
    failed = any(r["status"] == "failed" for r in data["results"])
    return not failed and not any(r["violations"] for r in data["contention"])


def add_records(out: Path, kind: str, records: list[dict[str, Any]]) -> None:
    """Append ``records`` under ``kind`` in the run's records.json."""
    data = _records(out)
    data[kind].extend(records)
    (out / "records.json").write_text(json.dumps(data, indent=1, default=str))


def _records(out: Path) -> dict[str, Any]:
    path = out / "records.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    kinds = (
        "loads",
        "results",
        "placement",
        "placement_writes",
        "http",
        "concurrency",
        "split",
        "contention",
        "startup",
        "shapes",
        "cluster",
    )
    for kind in kinds:
        data.setdefault(kind, [])
    return data


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build(out: Path, config: RunConfig, notes: dict[str, str], baseline: Path | None) -> str:
    """Write every artefact of the run into ``out``; return the short table to print."""
    data = _records(out)
    data["meta"] = {
        "scale": config.scale,
        "backends": list(config.backends),
        "sizes": list(config.sizes),
        "finished": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _git_commit(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "notes": notes,
        "baseline": str(baseline) if baseline else None,
    }
    base = _baseline(baseline)
    for r in data["results"]:
        old = base.get(_key(r))
        if old and r.get("median_ms") and old.get("median_ms"):
            r["baseline_median_ms"] = old["median_ms"]
            r["change_pct"] = round(100 * (r["median_ms"] / old["median_ms"] - 1), 1)
    (out / "results.json").write_text(json.dumps(_trimmed(data), indent=1, default=str))
    plots = _plots(out, data["results"])
    scale_plot = _scale_plot(out, data["results"])
    if scale_plot:
        plots = [scale_plot, *plots]
    ratio_plot = _ratio_plot(out, data["placement"])
    (out / "report.md").write_text(_markdown(data, plots, ratio_plot))
    return _short_table(data["results"])


def _trimmed(data: dict[str, Any], limit: int = 4000) -> dict[str, Any]:
    """``data`` with each plan's SQL and text cut to ``limit`` characters (IN lists of
    thousands of ids make them huge); ``records.json`` keeps them whole."""
    results = []
    for r in data["results"]:
        if "plans" in r:
            r = {
                **r,
                "plans": [
                    {**p, "sql": p["sql"][:limit], "plan": p["plan"][:limit]} for p in r["plans"]
                ],
            }
        results.append(r)
    return {**data, "results": results}


def _baseline(path: Path | None) -> dict[Key, dict[str, Any]]:
    if path is None or not path.exists():
        return {}
    return {_key(r): r for r in json.loads(path.read_text()).get("results", [])}


# ---------------------------------------------------------------- plots


def _plots(out: Path, results: list[dict[str, Any]]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for backend in sorted({r["backend"] for r in results}):
        series: dict[str, list[tuple[int, float]]] = {}
        for r in results:
            if r["backend"] == backend and r.get("median_ms"):
                series.setdefault(r["scenario"], []).append((int(r["hosts"]), r["median_ms"]))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(10, 5.5))
        colors = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]
        sizes: set[int] = set()
        for i, (scenario, points) in enumerate(sorted(series.items())):
            xs, ys = zip(*sorted(points), strict=True)
            sizes.update(xs)
            style = "-" if i < len(colors) else "--"
            ax.plot(xs, ys, style, marker="o", color=colors[i % len(colors)], label=scenario)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sorted(sizes), [f"{x:,}" for x in sorted(sizes)])
        ax.minorticks_off()
        ax.set_xlabel("hosts in the cloud")
        ax.set_ylabel("median latency (ms)")
        ax.set_title(f"rpquery on {backend}: latency vs cloud size")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        name = f"latency-{backend}.png"
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        names.append(name)
    return names


#: The candidate requests whose cost against cloud size the scale section shows:
#: ``limit=10`` should stay flat, ``limit=1000`` nearly so, the whole cloud grows.
SCALE_SCENARIOS = (
    (LIMIT10, "limit=10", "-"),
    ("candidates_limit1000", "limit=1000", "--"),
    ("candidates_forbidden_trait", "whole cloud", ":"),
)


def _scale_points(results: list[dict[str, Any]]) -> dict[tuple[str, str], dict[int, float]]:
    """``{(backend, scenario): {hosts: median ms}}`` of the scale section's scenarios."""
    wanted = {name for name, _, _ in SCALE_SCENARIOS}
    points: dict[tuple[str, str], dict[int, float]] = {}
    for r in results:
        if r["scenario"] in wanted and r.get("median_ms"):
            points.setdefault((r["backend"], r["scenario"]), {})[int(r["hosts"])] = r["median_ms"]
    return points


def _scale_plot(out: Path, results: list[dict[str, Any]]) -> str | None:
    """``scale-candidates.png``: median latency of limit=10, limit=1000 and whole-cloud
    candidates against hosts (log–log), one colour per backend; only with two sizes
    or more."""
    points = _scale_points(results)
    if len({h for series in points.values() for h in series}) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    backends = sorted({b for b, _ in points})
    colors = plt.get_cmap("tab10").colors  # type: ignore[attr-defined]
    sizes: set[int] = set()
    for i, backend in enumerate(backends):
        for name, label, style in SCALE_SCENARIOS:
            series = points.get((backend, name))
            if not series:
                continue
            xs = sorted(series)
            sizes.update(xs)
            ax.plot(
                xs,
                [series[x] for x in xs],
                style,
                marker="o",
                color=colors[i % len(colors)],
                label=f"{backend}: {label}",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sorted(sizes), [f"{x:,}" for x in sorted(sizes)])
    ax.minorticks_off()
    ax.set_xlabel("hosts in the cloud")
    ax.set_ylabel("median latency (ms)")
    ax.set_title("Allocation candidates vs cloud size (limit=10 should stay flat)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(out / "scale-candidates.png", dpi=90)
    plt.close(fig)
    return "scale-candidates.png"


def _scale_section(data: dict[str, Any]) -> list[str]:
    """Load time and the three candidate timings per backend and size, and how much
    ``limit=10`` grew from the smallest to the largest cloud."""
    points = _scale_points(data["results"])
    loads = {(r["backend"], int(r["hosts"])): r for r in data["loads"]}
    rows_of = {
        (r["backend"], int(r["hosts"])): r.get("rows")
        for r in data["results"]
        if r["scenario"] == "candidates_forbidden_trait"
    }
    keys = sorted(
        {(b, h) for (b, _), series in points.items() for h in series},
        key=lambda k: (k[0], k[1]),
    )
    if not keys:
        return []
    md = ["## Candidates vs cloud size", ""]
    rows = []
    for backend, hosts in keys:
        load = loads.get((backend, hosts), {})
        whole = points.get((backend, "candidates_forbidden_trait"), {}).get(hosts)
        n = rows_of.get((backend, hosts))
        rows.append(
            [
                backend,
                hosts,
                load.get("seconds"),
                points.get((backend, LIMIT10), {}).get(hosts),
                points.get((backend, "candidates_limit1000"), {}).get(hosts),
                whole,
                n,
                round(1000 * whole / n, 1) if whole and n else None,
            ]
        )
    md += _table(
        [
            "backend",
            "hosts",
            "load s",
            "limit=10 ms",
            "limit=1000 ms",
            "whole cloud ms",
            "candidates",
            "µs per candidate",
        ],
        rows,
    )
    md.append("")
    for (backend, name), series in sorted(points.items()):
        if name == LIMIT10 and len(series) >= 2:
            small, large = min(series), max(series)
            md.append(
                f"- {backend}: `limit=10` {series[small]:.1f} ms at {small:,} hosts, "
                f"{series[large]:.1f} ms at {large:,} hosts "
                f"(× {series[large] / series[small]:.2f} for × {large // small:,} hosts)"
            )
    return md


def _ratio_plot(out: Path, records: list[dict[str, Any]]) -> str | None:
    """Bars of Placement / rpquery per scenario and backend, at each backend's largest
    cloud; log scale, 1 = as fast."""
    largest: dict[str, int] = {}
    for r in records:
        if r.get("ratio"):
            largest[r["backend"]] = max(largest.get(r["backend"], 0), int(r["hosts"]))
    rows = [r for r in records if r.get("ratio") and int(r["hosts"]) == largest[r["backend"]]]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = sorted({r["scenario"] for r in rows})
    backends = sorted(largest)
    height = 0.8 / len(backends)
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(scenarios) + 1.5))
    for b, backend in enumerate(backends):
        got = {r["scenario"]: r["ratio"] for r in rows if r["backend"] == backend}
        ys = [i + b * height for i, name in enumerate(scenarios) if name in got]
        ax.barh(
            ys,
            [got[n] for n in scenarios if n in got],
            height=height,
            label=f"{backend} ({largest[backend]:,} hosts)",
        )
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(scenarios))], scenarios, fontsize=8)
    ax.set_xlabel("Placement median / rpquery median (> 1: rpquery faster)")
    ax.set_title("rpquery vs OpenStack Placement, same database")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "placement-ratio.png", dpi=90)
    plt.close(fig)
    return "placement-ratio.png"


# ---------------------------------------------------------------- text


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _table(headers: list[str], rows: Iterable[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return lines


def _short_table(results: list[dict[str, Any]]) -> str:
    lines = [
        f"{'backend':<11}{'hosts':>7}  {'scenario':<36}{'median ms':>11}{'p95 ms':>10}"
        f"{'stmts':>7}{'rows':>8}  status"
    ]
    for r in results:
        lines.append(
            f"{r['backend']:<11}{r['hosts']:>7}  {r['scenario']:<36}"
            f"{_fmt(r.get('median_ms'), 2):>11}{_fmt(r.get('p95_ms'), 2):>10}"
            f"{_fmt(r.get('statements')):>7}{_fmt(r.get('rows')):>8}  {r['status']}"
        )
    return "\n".join(lines)


def _markdown(data: dict[str, Any], plots: list[str], ratio_plot: str | None) -> str:
    meta = data["meta"]
    md = [
        "# rpquery benchmark report",
        "",
        f"Scale `{meta['scale']}` (hosts: {', '.join(map(str, meta['sizes']))}) on "
        f"{', '.join(meta['backends']) or 'no backend'}; finished {meta['finished']}, "
        f"commit `{meta['commit']}`, Python {meta['python']}, {meta['cpus']} CPUs.",
        f"Baseline: `{meta['baseline'] or 'none'}`.",
        "",
    ]
    for what, why in meta["notes"].items():
        md.append(f"- **{what} skipped**: {why}")
    md += ["", "## Cloud load times", ""]
    md += [
        "One transaction per cloud (schema upgrade and statistics refresh included). "
        "Usage summaries: `grouped` = filled by one grouped pass with their insert "
        "triggers suspended, `triggers` = by the triggers as rows were written; exact = "
        "equal to their recomputation afterwards (`verify_usage_summary`, "
        "`verify_provider_usages`). Load average: 5-minute, at the end of the load.",
        "",
    ]
    md += _table(
        [
            "backend",
            "hosts",
            "providers",
            "allocations",
            "consumers",
            "load s",
            "summaries",
            "exact",
            "load avg",
        ],
        [
            [
                r["backend"],
                r["hosts"],
                r["providers"],
                r["allocations"],
                r["consumers"],
                r["seconds"],
                r.get("summaries"),
                _exact(r.get("summaries_exact")),
                r.get("loadavg_5m"),
            ]
            for r in data["loads"]
        ],
    )
    md += ["", *_scale_section(data)]
    md += ["", "## Latency", ""]
    md += _latency_tables(data["results"])
    md += [f"![latency on {p}]({p})" for p in plots]
    md += ["", *_explain_section(data["results"])]
    md += ["", *_placement_section(data["placement"], data["placement_writes"])]
    if ratio_plot:
        md += ["", f"![rpquery vs Placement]({ratio_plot})"]
    md += ["", *_placement_writes_section(data["placement_writes"])]
    md += ["", *http_view.markdown(data["http"])]
    md += ["", *_concurrency_section(data["concurrency"])]
    md += ["", *split.markdown(data["split"])]
    md += ["", *_contention_section(data["contention"])]
    md += ["", *_startup_section(data["startup"])]
    md += ["", *_shapes_section(data["shapes"])]
    md += ["", *_cluster_section(data["cluster"])]
    md += ["", *_problems(data["results"])]
    return "\n".join(md) + "\n"


def _concurrency_section(rows: list[dict[str, Any]]) -> list[str]:
    from benchmarks.concurrency import markdown

    return markdown(rows)


def _exact(checked: bool | None) -> str | None:
    return None if checked is None else "yes" if checked else "**NO**"


def _scenario_section(
    title: str, scenario: str, rows: list[dict[str, Any]], intro: Callable[[dict[str, Any]], str]
) -> list[str]:
    """A scenario's section: ``intro`` of its first row, then the table of
    ``benchmarks.<scenario>.markdown``; a line saying how to select it when not run."""
    md = [f"## {title}", ""]
    if not rows:
        return [*md, f"Not run (select it with `--scenarios {scenario}`)."]
    markdown = importlib.import_module(f"benchmarks.{scenario}").markdown
    return [*md, intro(rows[0]), "", *markdown(rows)]


def _contention_section(rows: list[dict[str, Any]]) -> list[str]:
    return _scenario_section(
        "Contention",
        "contention",
        rows,
        lambda first: (
            f"{first['writers']} writer processes (claims, deletes, moves) and "
            f"{first['schedulers']} schedulers (plain, affinity, anti-affinity groups) on "
            f"{first['hosts']} hosts for {first['seconds']} s per backend "
            "(benchmarks/contention.py). A give-up is a conflict that outlived rpquery's "
            "retries and reached the caller; afterwards every invariant was checked."
        ),
    )


def _startup_section(rows: list[dict[str, Any]]) -> list[str]:
    return _scenario_section(
        "Start-up",
        "startup",
        rows,
        lambda first: (
            f"One-off commands, each a fresh process, median of {first['runs']} runs "
            f"(benchmarks/startup.py); the queries on a SQLite cloud of {first['hosts']} hosts. "
            "CPU is user + system time of the process; the wall clock follows the machine's load."
        ),
    )


def _shapes_section(rows: list[dict[str, Any]]) -> list[str]:
    return _scenario_section(
        "Never-seen request shapes",
        "shapes",
        rows,
        lambda first: (
            f"Random allocation-candidates requests on a {first['hosts']}-host cloud, "
            "each backend in a fresh process (benchmarks/shapes.py): each request asked once (the "
            "first ask: what a request never seen before costs), then again (the repeat). A "
            "first ask that compiled a statement met a statement shape nothing before it had."
        ),
    )


def _cluster_section(rows: list[dict[str, Any]]) -> list[str]:
    from benchmarks.cluster import markdown

    md = ["## Clusters", ""]
    if not rows:
        return [*md, "Not run (select it with `--scenarios cluster`)."]
    why = {r["cluster"]: r["not_run"] for r in rows if "not_run" in r}
    md += [
        "rpquery on loopback clusters started for the run (benchmarks/cluster.py, "
        "[deployment.md](../../../docs/deployment.md)). Every node shares this machine's "
        "cores: the figures compare the columns with each other, not with one server.",
        "",
        *markdown([r for r in rows if "not_run" not in r], why),
    ]
    return md


def _latency_tables(results: list[dict[str, Any]]) -> list[str]:
    md: list[str] = []
    for backend in sorted({r["backend"] for r in results}):
        md += [f"### {backend}", ""]
        rows = [
            [
                r["scenario"],
                r["hosts"],
                r.get("median_ms"),
                r.get("p95_ms"),
                r.get("ops_per_s"),
                r.get("statements"),
                r.get("rows"),
                f"{r['change_pct']:+.1f} %" if "change_pct" in r else "",
                r["status"],
            ]
            for r in sorted(
                (r for r in results if r["backend"] == backend),
                key=lambda r: (r["scenario"], int(r["hosts"])),
            )
        ]
        md += _table(
            [
                "scenario",
                "hosts",
                "median ms",
                "p95 ms",
                "ops/s",
                "statements",
                "rows",
                "vs baseline",
                "status",
            ],
            rows,
        )
        md.append("")
    return md


def _explain_section(results: list[dict[str, Any]]) -> list[str]:
    md = [
        "## EXPLAIN: full scans of " + ", ".join(explain.WATCHED),
        "",
        "Checked on the largest cloud of each backend. PostgreSQL plans come from "
        "`EXPLAIN (ANALYZE, BUFFERS)`, MariaDB from `ANALYZE FORMAT=JSON`, SQLite from "
        "`EXPLAIN QUERY PLAN`.",
        "",
    ]
    largest: dict[str, int] = {}
    for r in results:
        largest[r["backend"]] = max(largest.get(r["backend"], 0), int(r["hosts"]))
    checked = [r for r in results if "plans" in r and int(r["hosts"]) == largest[r["backend"]]]
    if not checked:
        return [*md, "No read scenario ran, so no plan was checked."]
    rows = []
    for r in sorted(checked, key=lambda r: (r["scenario"], r["backend"])):
        flags = [f for p in r["plans"] for f in p["flags"]]
        verdict = (
            "no full scan"
            if not flags
            else "; ".join(f"**{f['table']}**: `{f['detail']}` → {f['index']}" for f in flags)
        )
        rows.append([r["scenario"], r["backend"], r["hosts"], len(r["plans"]), verdict])
    md += _table(["scenario", "backend", "hosts", "statements explained", "flagged scans"], rows)
    md += ["", *_limit10_verdict(checked)]
    for r in checked:
        if r["scenario"] == LIMIT10:
            for i, p in enumerate(r["plans"]):
                md += [
                    "",
                    f"<details><summary>{r['scenario']} on {r['backend']} "
                    f"({r['hosts']} hosts), statement {i + 1}</summary>",
                    "",
                    "```",
                    p["plan"][:6000],
                    "```",
                    "</details>",
                ]
    return md


def _limit10_verdict(checked: list[dict[str, Any]]) -> list[str]:
    """The issue's acceptance check: no flagged full scan for the limit-10 query on the
    server backends at the largest size."""
    lines = ["**Limit-10 check** (`candidates_forbidden_trait_limit10`, server backends):"]
    found = False
    for r in checked:
        if r["scenario"] == LIMIT10 and r["backend"] != "sqlite":
            found = True
            flags = [f for p in r["plans"] for f in p["flags"]]
            verdict = "no flagged full scan" if not flags else f"{len(flags)} flagged scan(s)"
            lines.append(f"- {r['backend']} at {r['hosts']} hosts: {verdict}")
    return lines if found else []


def _placement_section(
    records: list[dict[str, Any]], writes: list[dict[str, Any]] | None = None
) -> list[str]:
    md = ["## Side by side with OpenStack Placement", ""]
    if not records and writes:
        return md
    if not records:
        return [*md, "Not run in this report (`make bench-placement` runs it)."]
    rows = [
        [
            r["scenario"],
            r["backend"],
            r["hosts"],
            r.get("rpquery_ms"),
            r.get("placement_ms"),
            r.get("ratio"),
            r.get("match"),
        ]
        for r in records
    ]
    md += [
        "Placement runs in-process in `.venv-placement` (noauth, WSGI call without "
        "HTTP), microversion 1.39, against the same database; ratio = Placement / "
        "rpquery median.",
        "",
    ]
    md += _table(
        ["scenario", "backend", "hosts", "rpquery ms", "Placement ms", "ratio", "answers"], rows
    )
    return md


def _placement_writes_section(records: list[dict[str, Any]]) -> list[str]:
    if not records:
        return []
    md = [
        "### Writes: claims/s against Placement's `PUT /allocations/{consumer}`",
        "",
        "New consumers, `VCPU:1,MEMORY_MB:256` on one of 400 VCPU providers, one writer "
        "(8 claims per round) and 8 writer threads (4 each); median of "
        f"{records[0].get('rounds', '?')} rounds after a warm-up. rpquery through its "
        "library write function (`replace_allocations`) and through its own WSGI app "
        "(the same `PUT`, microversion 1.39, in-process); Placement in-process WSGI on "
        "the same database (psycopg 2 on PostgreSQL). Placement's rate counts claims "
        "answered 204 only; ratio = rpquery library / Placement.",
        "",
    ]

    def statuses(value: Any) -> str:
        if not isinstance(value, dict):
            return ""
        return ", ".join(f"{k}×{v}" for k, v in value.items())

    md += _table(
        [
            "backend",
            "hosts",
            "writers",
            "rpquery library claims/s",
            "rpquery WSGI claims/s",
            "Placement claims/s",
            "ratio",
            "Placement answers",
        ],
        [
            [
                r["backend"],
                r["hosts"],
                r["writers"],
                r.get("rpquery_library_per_s"),
                r.get("rpquery_wsgi_per_s"),
                r.get("placement_per_s"),
                r.get("ratio"),
                statuses(r.get("placement_statuses")) or r.get("error", ""),
            ]
            for r in records
        ],
    )
    return md


def _problems(results: list[dict[str, Any]]) -> list[str]:
    bad = [r for r in results if r["status"] != "ok"]
    if not bad:
        return ["## Scenario status", "", "Every scenario ran."]
    md = ["## Scenarios not run or failed", ""]
    md += _table(
        ["scenario", "backend", "hosts", "status", "reason"],
        [[r["scenario"], r["backend"], r["hosts"], r["status"], r.get("reason", "")] for r in bad],
    )
    return md
