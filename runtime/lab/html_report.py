"""``commitlab report DIR``: one self-contained HTML page of what a command left in a directory.

It reads whichever records the directory holds: a run's ``result.json`` (``run``, ``deadlock``,
``simulate``), ``compare.json``, ``faults.json`` (the fault matrix), ``explore.json``, ``check.json``
(a bounded schedule search's certificate) and ``conformance.json`` (the lab against Hudi's own writer), and
writes one page with their tables, their pictures (embedded, so the page travels as one file),
a deadlock's explanation, the command that replays each run or failure, and links to the trace
files for Perfetto (ui.perfetto.dev opens them; they are not embedded: a trace can be large).
Every text that comes from a record is escaped.
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from runtime.core.json_doc import JsonObject

if TYPE_CHECKING:
    from runtime.lab.results import JobResult

RESULT = "result.json"
RECORDS = (RESULT, "compare.json", "faults.json", "explore.json", "check.json", "conformance.json")

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; } td, th { border: 1px solid #ddd; padding: 3px 8px; }
th { background: #f4f4f4; text-align: left; } td.num { text-align: right; }
pre, code { background: #f6f6f6; font: 13px ui-monospace, monospace; } pre { padding: 0.8em; overflow-x: auto; }
img { max-width: 100%; border: 1px solid #eee; } .bad { color: #b00000; font-weight: bold; }
.good { color: #1e7a34; font-weight: bold; } .note { color: #666; }
"""


def write_report(directory: str, out: str | None = None) -> str:
    """Writes the page (default ``DIR/report.html``) and returns its path. Raises
    FileNotFoundError naming what it looked for when the directory holds none of the records."""
    out = out or os.path.join(directory, "report.html")
    page = build_report(directory)
    with open(out, "w", encoding="utf-8") as f:
        f.write(page)
    return out


def build_report(directory: str) -> str:
    found = [name for name in RECORDS if os.path.isfile(os.path.join(directory, name))]
    if not found:
        raise FileNotFoundError(
            f"{directory} holds none of {', '.join(RECORDS)}: point commitlab report at the --out directory "
            "of a run, compare, faults, simulate, explore or check command"
        )
    sections = {
        "result.json": _run_section,
        "compare.json": _compare_section,
        "faults.json": _faults_section,
        "explore.json": _explore_section,
        "check.json": _check_section,
        "conformance.json": _conformance_section,
    }
    body = [sections[name](_load(directory, name), directory) for name in found]
    title = f"commitlab report: {os.path.basename(os.path.abspath(directory))}"
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{_e(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n"
    )


# -- building blocks -------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _load(directory: str, name: str) -> JsonObject:
    with open(os.path.join(directory, name), encoding="utf-8") as f:
        doc: JsonObject = json.load(f)
    return doc


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Callable[[int], bool] = bool) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td class='num'>{_e(c)}</td>" if numeric(i) else f"<td>{_e(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _pairs(rows: Iterable[tuple[str, Any]]) -> str:
    return "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>"


def _image(path: str, alt: str) -> str:
    if not os.path.isfile(path):
        return ""
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    return f"<p><img alt='{_e(alt)}' src='data:image/png;base64,{data}'></p>"


def _code(text: str) -> str:
    return f"<pre>{_e(text)}</pre>"


def _verdict(ok: bool | None, yes: str = "verified", no: str = "VIOLATED") -> str:
    if ok is None:
        return "<span class='note'>not checked</span>"
    return f"<span class='good'>{_e(yes)}</span>" if ok else f"<span class='bad'>{_e(no)}</span>"


# -- a run -------------------------------------------------------------------------------------


def _run_section(doc: JsonObject, directory: str) -> str:
    from runtime.lab.results import JobResult

    result = JobResult.from_json(doc)
    host = "the simulator" if result.simulation is not None else "Ray"
    parts = [f"<h2>Run: {_e(result.protocol)}, {_e(result.writers)} writers, on {host}</h2>"]
    parts.append(_pairs(_run_facts(result)))
    eo = result.exactly_once
    parts.append(f"<p>Exactly-once: {_verdict(eo.verified if eo else None)}</p>")
    prefix = result.committed_prefix
    if prefix:
        parts.append(f"<p>Committed prefix ({_e(prefix.prefix)}): {_verdict(prefix.verified)}</p>")
    if result.deadlock:
        parts.append("<h3>Deadlock</h3>" + _code(result.deadlock.explanation))
    parts.append(_image(os.path.join(directory, "timeline.png"), "the run's timeline"))
    parts.append(_traces(directory, result))
    parts.append("<h3>Run it again</h3>" + _code(_rerun_command(result, directory)))
    return "\n".join(parts)


def _run_facts(result: JobResult) -> list[tuple[str, Any]]:
    from runtime.lab.report import checkpoints_line, empty_rounds_line

    facts: list[tuple[str, Any]] = [
        ("status", result.status.value),
        ("error", result.error or "none"),
        ("rows in", f"{result.figures.rows_in:,} (stream: {result.records:,})"),
        ("checkpoints", checkpoints_line(result)),
        ("commits", ", ".join(f"{c['instant']} (ckp {c['checkpoint']})" for c in result.commits) or "none"),
    ]
    if result.empty_rounds:
        facts.append(("empty rounds", empty_rounds_line(result.empty_rounds)))
    for n, f in enumerate(result.failovers, start=1):
        facts.append((f"failover {n}", f"{f.strategy}, restored checkpoint {f.restored_checkpoint}: {f.error}"))
    facts += [("rolled back", f"{r['instant']}: {r['reason']}") for r in result.rollbacks]
    if result.faults_armed:
        fired = ", ".join(f["point"] for f in result.faults_fired) or "none"
        facts.append(("faults", f"armed {', '.join(result.faults_armed)}; fired {fired}"))
        if result.faults_not_fired:
            facts.append(("never fired", ", ".join(result.faults_not_fired)))
    return facts


def _traces(directory: str, result: JobResult) -> str:
    trace_file = result.ray.trace_file if result.ray else None
    names = [n for n in ("trace.json", os.path.basename(trace_file or "")) if n]
    found = sorted({n for n in names if os.path.isfile(os.path.join(directory, n))})
    if not found:
        return ""
    links = ", ".join(f"<a href='{_e(n)}'>{_e(n)}</a>" for n in found)
    return (
        f"<p>Trace for Perfetto: {links}. Open <a href='https://ui.perfetto.dev'>ui.perfetto.dev</a> and choose "
        "<em>Open trace file</em>.</p>"
    )


def _rerun_command(result: JobResult, directory: str) -> str:
    path = os.path.join(directory, "result.json")
    if result.simulation is not None:
        return f"commitlab simulate --config {path} --seed {result.simulation.seed} --out NEW_DIR"
    return f"commitlab run --config {path} --out NEW_DIR"


# -- a comparison --------------------------------------------------------------------------------


def _compare_section(doc: JsonObject, directory: str) -> str:
    """The comparison: one table of protocols, or with ``--table-type both`` one per table type,
    the pictures, and links to each run's own record (only to records the directory holds)."""
    w = doc["workload"]
    by_type: dict[str, JsonObject] = doc.get("table_types") or {"": doc["protocols"]}
    parts = [
        f"<h2>Comparison: {_e(w['writers'])} writers, {_e(w['checkpoints'])} checkpoints, {w['records']:,} records</h2>"
    ]
    for table_type, rows in by_type.items():
        if table_type:
            parts.append(f"<h3>{_e(table_type)}</h3>")
        parts.append(_compare_rows(rows))
        links = [
            f"<a href='{_e(rel)}'>{_e(name)}</a>"
            for name in rows
            if os.path.isfile(os.path.join(directory, rel := "/".join(p for p in (table_type, name, RESULT) if p)))
        ]
        if links:
            label = f" ({_e(table_type)})" if table_type else ""
            parts.append(f"<p>Each protocol's own record{label}: " + ", ".join(links) + "</p>")
    parts += [
        f"<p class='note'>Cadence: {_e(doc.get('commit_cadence', ''))}. Not scaled by --time-scale: "
        f"{_e(', '.join(doc.get('not_scaled', [])))}.</p>",
        _image(os.path.join(directory, "latency.png"), "commit-to-unblock latency per protocol"),
        _image(os.path.join(directory, "dfs_ops.png"), "DFS operations per checkpoint per protocol"),
        _image(os.path.join(directory, "table_types.png"), "copy-on-write against merge-on-read per protocol"),
    ]
    return "\n".join(parts)


def _compare_rows(rows: JsonObject) -> str:
    out = []
    for name, r in rows.items():
        out.append(
            (
                name,
                r["commits"],
                r["deadlock_task"] or "no",
                "-" if r["commit_to_unblock_p50_s"] is None else f"{r['commit_to_unblock_p50_s'] * 1000:.1f}",
                f"{r['dfs_ops_per_checkpoint_total']:g}",
                f"{r['rpcs_per_checkpoint']:g}",
                {True: "verified", False: "VIOLATED", None: "-"}[r["exactly_once"]],
            )
        )
    headers = ("protocol", "commits", "deadlock", "unblock p50 ms", "DFS ops/ckp", "RPCs/ckp", "exactly-once")
    return _table(headers, out, numeric=lambda i: i in (1, 3, 4, 5))


# -- the lab against Hudi's own writer --------------------------------------------------------------


def _conformance_section(doc: JsonObject, directory: str) -> str:
    """``commitlab conformance``: per table type, the lab beside Hudi's writer, figure by figure."""
    out = [
        f"<h2>Conformance: {_e(doc['protocol'])} against Hudi {_e(doc['release'])}'s Flink writer "
        f"(Flink {_e(doc['flink'])}), {_e(doc['writers'])} writers, {_e(doc['checkpoints'])} checkpoints</h2>",
        f"<p>{_verdict(doc['conforms'], 'conforms', 'DIFFERS')}: the tables (official reader) and the "
        "timelines' shape, beyond the differences docs/FIDELITY.md names.</p>",
    ]
    for check in doc["checks"]:
        rows = [
            (
                "rows",
                check["contents"]["rows_lab"],
                check["contents"]["rows_real"],
                "equal" if check["contents"]["equal"] else "DIFFER",
            )
        ]
        for group in ("dfs_per_checkpoint_by_component", "dfs_per_checkpoint_by_role"):
            for name, r in check[group].items():
                rows.append((f"DFS calls/ckp, {name}", r["lab"], r["real"], "-" if r["ratio"] is None else r["ratio"]))
        out.append(f"<h3>{_e(check['table_type'])}</h3>")
        out.append(_table(("figure", "lab", "Hudi", "lab/Hudi"), rows, numeric=lambda i: i > 0))
        notes = check["timeline_differences"] + check["named_differences"]
        if notes:
            out.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    out.append(_image(os.path.join(directory, "conformance.png"), "DFS calls per checkpoint by part, lab and Hudi"))
    return "\n".join(out)


# -- a fault matrix ------------------------------------------------------------------------------


def _faults_section(doc: JsonObject, directory: str) -> str:
    runs = doc["runs"]
    counts: dict[str, int] = {}
    for r in runs:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    notable = [r for r in runs if r["outcome"] != "passed"]
    rows = [
        (r["protocol"], r["fault"], r["seed"], r["outcome"], r.get("explanation", ""), r.get("replay", ""))
        for r in notable
    ]
    every = [(r["protocol"], r["fault"], r["seed"], r["outcome"]) for r in runs]
    return "\n".join(
        [
            f"<h2>Fault matrix: {len(runs)} runs</h2>",
            _pairs(sorted(counts.items())),
            _image(os.path.join(directory, "faults.png"), "outcome of every protocol under every fault"),
            "<h3>Every run that did not simply pass, and its replay command</h3>",
            _table(("protocol", "fault", "seed", "outcome", "why", "replay"), rows) if rows else "<p>None.</p>",
            f"<details><summary>all {len(runs)} runs</summary>"
            + _table(("protocol", "fault", "seed", "outcome"), every)
            + "</details>",
        ]
    )


# -- an exploration ------------------------------------------------------------------------------


def _explore_section(doc: JsonObject, directory: str) -> str:
    counts = doc["counts"]
    from runtime.lab.fault_matrix import FAILED, KNOWN, PASSED, VIOLATION

    outcomes = (PASSED, KNOWN, VIOLATION, FAILED)
    rows = [(p, *(c.get(o, 0) for o in outcomes)) for p, c in counts.items()]
    parts = [
        f"<h2>Exploration: scenario {_e(doc['scenario'])}, {_e(doc['seeds'])} seeds a protocol</h2>",
        _table(("protocol", *outcomes), rows, numeric=lambda i: i > 0),
    ]
    for title, records in (
        ("Failures", doc.get("failures") or []),
        ("Known failures", doc.get("known_failures") or []),
    ):
        if not records:
            continue
        parts.append(f"<h3>{title}</h3>")
        for r in records[:20]:
            parts.append(
                f"<p><strong>{_e(r['protocol'])}, seed {_e(r['seed'])}</strong>: {_e(r['detail'])}<br>"
                f"schedule: {_e(r.get('schedule', ''))}</p>"
                + _code(r["replay"])
                + (
                    f"<details><summary>trace excerpt</summary>{_code(chr(10).join(r['trace_excerpt']))}</details>"
                    if r.get("trace_excerpt")
                    else ""
                )
            )
    return "\n".join(parts)


# -- a bounded search (commitlab check) ------------------------------------------------------------


def _check_section(doc: JsonObject, directory: str) -> str:
    cert = doc.get("certificate")
    if cert is None:  # a --replay or a --strategy pct/random sample: its record as it is
        return f"<h2>Check: {_e(doc.get('protocol'))}</h2>" + _code(json.dumps(doc, indent=2)[:20_000])
    head = "complete" if cert["complete"] else f"partial: {cert['stopped']}"
    figures = [(k, cert[k]) for k in ("bound", "runs", "distinct_states", "transitions", "max_depth", "real_s")]
    parts = [
        f"<h2>Check: {_e(doc['protocol'])} within {_e(cert['bound'])} deviations ({_e(head)})</h2>",
        f"<p>{_e(doc.get('schedule_described', ''))}</p>",
        _pairs(figures),
        _table(("invariant", "within the bound"), cert["invariants"].items()),
    ]
    for key, title in (
        ("counterexample", "Shortest counterexample"),
        ("known_failure", "Shortest known failure"),
        ("recovered_by_timeout", "Shortest run saved only by a timeout"),
    ):
        rec = doc.get(key)
        if rec:
            devs = "; ".join(f"#{d['choice']}: {d['what']}" for d in rec["deviations"]) or "none"
            parts.append(f"<h3>{title}</h3><p>{_e(rec['detail'])}<br>deviations: {_e(devs)}</p>" + _code(rec["replay"]))
            if rec.get("wait_for"):
                parts.append(_code(str(rec["wait_for"].get("explanation", ""))))
            parts.append(_code("\n".join(rec.get("trace_excerpt") or [])))
    return "\n".join(parts)
