"""The same workload under every protocol, one table of figures, JSON and plots.

Latencies are also given as a multiple of one measured actor-RPC round trip: the physical floor a
coordination protocol on Ray cannot beat.

``--table-type both`` runs every protocol on a copy-on-write and on a merge-on-read table and puts
them side by side: write amplification (bytes the commits and compactions wrote / the input
records' bytes), base-file, log-file and compaction writes per checkpoint, commit latency and rows/s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime.core.config import JobConfig, flag_of
from runtime.core.durations import TRANSPORT_DEADLINE_FLOORS_S, transport_floor
from runtime.core.json_doc import JsonObject
from runtime.protocols import protocol_name

if TYPE_CHECKING:
    from rich.table import Table

    from runtime.lab.results import JobResult


def figures(result: JobResult, rtt_s: float | None) -> JsonObject:
    """One protocol's row of the comparison, from its result."""
    fig = result.figures
    ckp = fig.checkpoints
    n_ckp = max(1, ckp.completed + ckp.aborted)
    by_type: dict[str, float] = {}
    for ops in fig.dfs_ops_per_checkpoint.values():
        for op, n in ops.items():
            by_type[op] = round(by_type.get(op, 0.0) + n, 2)
    control_rpcs = {k: v for k, v in fig.rpcs.items() if k != "push_input"}
    lat = fig.commit_to_unblock_s
    eo = result.exactly_once

    def times_rtt(x: float | None) -> float | None:
        return round(x / rtt_s, 1) if x is not None and rtt_s else None

    return {
        "status": result.status.value,
        "commits": len(result.commits),
        "checkpoints_completed": ckp.completed,
        "checkpoints_aborted": ckp.aborted,
        "deadlock": result.deadlock is not None,
        "deadlock_task": result.deadlock.task if result.deadlock else None,
        "commit_to_unblock_p50_s": lat["p50"],
        "commit_to_unblock_p99_s": lat["p99"],
        "commit_to_unblock_p50_rtt": times_rtt(lat["p50"]),
        "commit_to_unblock_p99_rtt": times_rtt(lat["p99"]),
        "commit_to_unblock_samples": fig.commit_to_unblock_samples,
        "rows_per_s": result.rows_per_s,
        # on a broker: produce-to-consume per control message, and the producer's wait for the ack
        "control_message_s": fig.control_topic.get("control_topic.delivery_s"),
        "control_publish_s": fig.control_topic.get("control_topic.publish_s"),
        "control_commit_s": fig.control_topic.get("control_topic.commit_s"),
        **_data_figures(result),
        "dfs_ops_per_checkpoint": by_type,
        "dfs_ops_per_checkpoint_total": round(sum(by_type.values()), 2),
        "dfs_ops_per_checkpoint_by_role": fig.dfs_ops_per_checkpoint,
        "dfs_ops_per_checkpoint_by_component": fig.dfs_per_checkpoint_by_component,
        "rpcs_per_checkpoint": round(sum(control_rpcs.values()) / n_ckp, 2),
        "rpcs_by_kind": control_rpcs,
        "writer_blocked_s": round(sum(fig.writer_blocked_s.values()), 3),
        "exactly_once": None if eo is None else eo.verified,
        "exactly_once_detail": None if eo is None else eo.to_json(),
        "error": result.error,
        "run_s": result.timing["run_s"],
    }


def _data_figures(result: JobResult) -> JsonObject:
    """What the run wrote (result.json's ``data_written``): write amplification and file writes."""
    data = result.data_written
    return {
        "write_amplification": data.get("write_amplification"),
        "bytes_written": data.get("bytes"),
        "base_files_per_checkpoint": data.get("base_files_per_checkpoint"),
        "log_files_per_checkpoint": data.get("log_files_per_checkpoint"),
        "compaction_base_files_per_checkpoint": data.get("compaction_base_files_per_checkpoint"),
        "compactions": len(result.compactions.get("completed", [])),
    }


def one_commit_cadence(base: JobConfig) -> JobConfig:
    """Every protocol commits once a checkpoint interval: the Flink protocols commit at each
    checkpoint, Kafka Connect at its commit interval (Hudi's default 60 s, against this lab's
    checkpoint interval of 4 s before scaling). Unless ``--kafka-commit-interval`` was given, the
    comparison sets the Connect interval to the checkpoint interval, so the rows compare
    protocols and not cadences; compare.json records the value."""
    if "kafka_commit_interval_s" in (base.explicit_durations or ()):
        return base
    return base.replace(kafka_commit_interval_s=base.checkpoint_interval_s)


BROKER_ROW = "control-topic-kafka"


def _rows(base: JobConfig, protocols: list[str]) -> list[tuple[str, str, str]]:
    """(row name, protocol spec, --control-topic) per run: every protocol on the model, and with
    ``--control-topic`` naming a broker, control-topic once more on it (the row ``control-topic-kafka``)."""
    rows = []
    for spec in protocols:
        name = protocol_name(spec)  # a spec may be a file's path: rows and directories use its name
        rows.append((name, spec, "model"))
        if name == "control-topic" and base.control_topic != "model":
            rows.append((BROKER_ROW, spec, base.control_topic))
    return rows


def run_count(base: JobConfig, protocols: list[str]) -> int:
    """How many runs a comparison of ``protocols`` makes per table type."""
    return len(_rows(base, protocols))


def run_compare(
    base: JobConfig,
    protocols: list[str],
    out_dir: str,
    *,
    run: Callable[[JobConfig, str], JobResult],
    rtt: dict[str, float] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    table_types: list[str] | None = None,
) -> JsonObject:
    """Runs ``base`` once per protocol (each on its own table under ``out_dir/<protocol>``), at
    one commit cadence (:func:`one_commit_cadence`). With several ``table_types`` (both: the
    command line's ``--table-type both``), once per protocol and type, under
    ``out_dir/<type>/<protocol>``; ``protocols`` then holds the first type's rows."""
    base = one_commit_cadence(base)
    types = table_types or [base.table_type]
    by_type: dict[str, JsonObject] = {}
    for t, table_type in enumerate(types):
        rows_of_type: JsonObject = {}
        for i, (name, spec, control_topic) in enumerate(_rows(base, protocols)):
            if on_start:
                on_start(f"{name} ({table_type})" if len(types) > 1 else name, t * len(protocols) + i)
            sub = os.path.join(out_dir, table_type, name) if len(types) > 1 else os.path.join(out_dir, name)
            cfg = base.replace(
                protocol=spec, table=os.path.join(sub, "table"), table_type=table_type, control_topic=control_topic
            )
            result = run(cfg, sub)
            rows_of_type[name] = figures(result, rtt["p50_s"] if rtt else None)
        by_type[table_type] = rows_of_type
    rows = by_type[types[0]]
    doc = {
        "workload": {
            "writers": base.writers,
            "checkpoints": base.checkpoints,
            "records": base.records,
            "source": base.source,
        },
        "durations": base.effective_durations(),
        "commit_cadence": "every protocol commits once a checkpoint interval"
        if base.kafka_commit_interval_s == base.checkpoint_interval_s
        else f"Kafka Connect commits every {base.kafka_commit_interval_s:g} s (--kafka-commit-interval), "
        f"the others every checkpoint ({base.checkpoint_interval_s:g} s)",
        # what --time-scale does not shrink: at a small scale these weigh more against the timeouts
        "not_scaled": ["RPC latency", "DFS latency", "table-lock hold time", *_floored(base)],
        "rpc_round_trip": rtt,
        "protocols": rows,
        "table_types": by_type if len(types) > 1 else {},
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump(doc, f, indent=2, default=str)
    return doc


def plot_compare(doc: JsonObject, out_dir: str) -> list[str]:
    """Latency distribution per protocol and DFS operations per checkpoint by type."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["protocols"]
    names = list(rows)
    paths = []

    fig, ax = plt.subplots(figsize=(9, 4.5))
    data = [[s * 1000 for s in rows[n]["commit_to_unblock_samples"]] or [float("nan")] for n in names]
    ax.boxplot(data, showfliers=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=15)
    ax.set_ylabel("commit-to-unblock latency (ms)")
    rtt = (doc.get("rpc_round_trip") or {}).get("p50_s")
    if rtt:
        ax.axhline(rtt * 1000, color="grey", linestyle="--", linewidth=1)
        ax.text(0.6, rtt * 1000, f" one actor RPC ({rtt * 1000:.1f} ms)", va="bottom", color="grey")
    for i, n in enumerate(names, start=1):
        if rows[n]["deadlock"]:
            ax.text(i, ax.get_ylim()[1] * 0.9, "DEADLOCK", ha="center", color="red", fontweight="bold")
        elif not rows[n]["commit_to_unblock_samples"]:
            ax.text(i, ax.get_ylim()[1] * 0.05, "writers never\nwaited", ha="center", color="grey")
    ax.set_title(
        f"How long a blocked writer waits after the instant is released ({doc['workload']['writers']} writers)"
    )
    paths.append(_save(fig, out_dir, "latency.png", plt))

    fig, ax = plt.subplots(figsize=(9, 4.5))
    ops = sorted({op for n in names for op in rows[n]["dfs_ops_per_checkpoint"]})
    bottom = [0.0] * len(names)
    for op in ops:
        vals = [rows[n]["dfs_ops_per_checkpoint"].get(op, 0.0) for n in names]
        ax.bar(names, vals, bottom=bottom, label=op)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("DFS operations per checkpoint (protocol roles)")
    ax.set_title("Storage requests the commit protocol makes per checkpoint")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, never over one
    plt.setp(ax.get_xticklabels(), rotation=15)
    paths.append(_save(fig, out_dir, "dfs_ops.png", plt))
    if doc.get("table_types"):
        paths.append(_plot_table_types(doc, out_dir, plt))
    return paths


def _plot_table_types(doc: JsonObject, out_dir: str, plt: Any) -> str:
    """Per protocol, each table type's write amplification and rows/s, side by side."""
    types = doc["table_types"]
    names = list(next(iter(types.values())))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(types)
    for k, (table_type, rows) in enumerate(types.items()):
        xs = [i + (k - (len(types) - 1) / 2) * width for i in range(len(names))]
        axes[0].bar(xs, [rows[n]["write_amplification"] or 0 for n in names], width, label=table_type)
        axes[1].bar(xs, [rows[n]["rows_per_s"] for n in names], width, label=table_type)
    for ax, label in zip(axes, ("write amplification (bytes written / input bytes)", "rows/s"), strict=True):
        ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
        ax.set_ylabel(label)
    # one legend below both plots, never over a bar
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(types), fontsize=8)
    w = doc["workload"]
    fig.suptitle(f"Copy-on-write against merge-on-read: {w['writers']} writers, {w['records']:,} records")
    return _save(fig, out_dir, "table_types.png", plt, bottom=0.1)


def _save(fig: Any, out_dir: str, name: str, plt: Any, bottom: float = 0.0) -> str:
    """Lays the figure out (``bottom``: the figure's share kept free for a legend below), writes
    ``out_dir/name`` and frees it; the path."""
    fig.tight_layout(rect=(0.0, bottom, 1.0, 1.0))
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def compare_tables(doc: JsonObject) -> list[Table]:
    """What each protocol did, what it cost, its DFS operations by type and by part of the table:
    tables that each read at 80 columns."""
    tables = [_outcome_table(doc), _cost_table(doc), *_control_topic_table(doc), _dfs_table(doc)]
    tables += _component_tables(doc)
    return tables + ([_table_types_table(doc)] if doc.get("table_types") else [])


SHORT_TYPE = {"copy-on-write": "COW", "merge-on-read": "MOR"}


def _table_types_table(doc: JsonObject) -> Table:
    """Per protocol and table type: write amplification, files written per checkpoint, commit
    latency and rows/s."""
    t = _table(
        "Copy-on-write against merge-on-read (per checkpoint: base, log and compacted files written)",
        ["protocol", "table", "write\namp", "base\n/ckp", "log\n/ckp", "compact\n/ckp", "unblock\nms p50", "rows/s"],
    )
    t.caption = "write amp: bytes written (commits and compactions) / the input records' bytes."
    types = doc["table_types"]
    for name in next(iter(types.values())):
        for table_type, rows in types.items():
            r = rows[name]
            p50 = r["commit_to_unblock_p50_s"]
            t.add_row(
                name,
                SHORT_TYPE.get(table_type, table_type),
                "-" if r["write_amplification"] is None else f"{r['write_amplification']:.2f}",
                f"{r['base_files_per_checkpoint'] or 0:g}",
                f"{r['log_files_per_checkpoint'] or 0:g}",
                f"{r['compaction_base_files_per_checkpoint'] or 0:g}",
                "-" if p50 is None else f"{p50 * 1000:.1f}",
                f"{r['rows_per_s']:,.0f}",
            )
    return t


def _table(title: str, columns: list[str]) -> Table:
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, col in enumerate(columns):
        t.add_column(col, no_wrap=i == 0, justify="left" if i == 0 else "right")
    return t


def _outcome_table(doc: JsonObject) -> Table:
    w = doc["workload"]
    t = _table(
        f"commitlab compare: {w['writers']} writers, {w['checkpoints']} checkpoints, {w['records']:,} records",
        ["protocol", "commits", "checkpoints\nok/abort", "deadlock", "rows/s", "exactly\nonce"],
    )
    for name, r in doc["protocols"].items():
        eo = r["exactly_once"]
        t.add_row(
            name,
            str(r["commits"]),
            f"{r['checkpoints_completed']}/{r['checkpoints_aborted']}",
            f"[red]{r['deadlock_task']}[/red]" if r["deadlock"] else "no",
            f"{r['rows_per_s']:,.0f}",
            "-" if eo is None else ("[green]verified[/green]" if eo else "[red]VIOLATED[/red]"),
        )
    if doc.get("commit_cadence"):
        t.caption = f"Cadence: {doc['commit_cadence']}."
    return t


def _cost_table(doc: JsonObject) -> Table:
    rtt = doc.get("rpc_round_trip") or {}
    t = _table(
        "What a checkpoint costs" + (f" (one actor RPC = {rtt['p50_s'] * 1000:.2f} ms)" if rtt else ""),
        ["protocol", "unblock ms\np50/p99", "in RPCs\np50/p99", "DFS ops\n/ckp", "RPCs\n/ckp", "blocked\ns"],
    )

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1000:.1f}"

    for name, r in doc["protocols"].items():
        rtts = (
            "-"
            if r["commit_to_unblock_p50_rtt"] is None
            else f"{r['commit_to_unblock_p50_rtt']:g}/{r['commit_to_unblock_p99_rtt']:g}"
        )
        t.add_row(
            name,
            f"{ms(r['commit_to_unblock_p50_s'])}/{ms(r['commit_to_unblock_p99_s'])}",
            rtts,
            f"{r['dfs_ops_per_checkpoint_total']:g}",
            f"{r['rpcs_per_checkpoint']:g}",
            f"{r['writer_blocked_s']:.2f}",
        )
    scale = (doc.get("durations") or {}).get("time_scale")
    if scale is not None:
        t.caption = (
            f"Hudi's and Flink's durations x {scale:g} (--time-scale). Not scaled: "
            + ", ".join(doc.get("not_scaled", []))
            + "; latencies in ms are this machine's, not production's."
        )
    return t


def _control_topic_table(doc: JsonObject) -> list[Table]:
    """The control topic's rows, model and broker: a control message from produce to consume, the
    producer's wait for the broker's ack, and a commit from END_COMMIT to ACK_COMMIT."""
    rows = {n: r for n, r in doc["protocols"].items() if r.get("control_commit_s")}
    if not rows:
        return []
    t = _table(
        "The control topic (ms, p50/p99)",
        ["protocol", "control message\nproduce-consume", "produce\nacked", "commit\nEND->ACK"],
    )

    def pair(p: JsonObject | None) -> str:
        if not p or p.get("p50") is None:
            return "-"
        return f"{p['p50'] * 1000:.1f}/{p['p99'] * 1000:.1f}"

    for name, r in rows.items():
        t.add_row(name, pair(r.get("control_message_s")), pair(r.get("control_publish_s")), pair(r["control_commit_s"]))
    t.caption = "Per message figures on a broker only (the model's messages are actor calls: see RPCs)."
    return [t]


def _floored(cfg: JobConfig) -> list[str]:
    """The transport deadlines the time scale did not shrink below their floor (not set explicitly)."""
    explicit = set(cfg.explicit_durations or ())
    return [
        f"{flag_of(name)} below {transport_floor(name, cfg.writers):g} s"
        for name in TRANSPORT_DEADLINE_FLOORS_S
        if name not in explicit
    ]


def _dfs_table(doc: JsonObject) -> Table:
    """DFS operations per checkpoint by type, one row per protocol."""
    rows = doc["protocols"]
    ops = sorted({op for r in rows.values() for op in r["dfs_ops_per_checkpoint"]})
    t = _table("DFS operations per checkpoint, by type (the protocol's roles)", ["protocol", *ops])
    t.padding = (0, 1) if len(ops) < 7 else (0, 0, 0, 1)
    for name, r in rows.items():
        t.add_row(name, *[f"{r['dfs_ops_per_checkpoint'].get(op, 0):.3g}" for op in ops])
    return t


# parts of the table per by-part table: a protocol column and six numbers read at 80 columns
_PARTS_PER_TABLE = 6


def _component_tables(doc: JsonObject) -> list[Table]:
    """DFS operations per checkpoint by the part of the table they touch (every role of the job);
    more parts than fit 80 columns (the metadata table, clean, rollback, archive) go on to a
    second table."""
    rows = doc["protocols"]
    parts = sorted({c for r in rows.values() for c in r.get("dfs_ops_per_checkpoint_by_component", {})})
    title = "DFS operations per checkpoint, by part of the table (every role)"
    out = []
    for at in range(0, len(parts), _PARTS_PER_TABLE):
        chunk = parts[at : at + _PARTS_PER_TABLE]
        t = _table(title if at == 0 else f"{title}, continued", ["protocol", *chunk])
        for name, r in rows.items():
            got = r.get("dfs_ops_per_checkpoint_by_component", {})
            t.add_row(name, *[f"{got.get(c, 0):.3g}" for c in chunk])
        out.append(t)
    return out
