"""``commitlab faults``: protocols x fault points x seeds, each run checked for exactly-once.

Outcomes, in Jepsen's spirit:

- ``passed``: the run recovered (or rode the fault out) and the official reader finds nothing
  lost, duplicated or unexpected;
- ``known failure``: the protocol reproduced the failure it is known for (P1's deadlock,
  coordination-rpc's spurious restart under a held lock), detected and diagnosed, or a loss that
  Hudi's own code has under the fault (:func:`known_loss`, each with its source);
- ``VIOLATION``: the run finished but the table is not exactly-once: a bug, reported with the seed
  and the command that replays it;
- ``FAILED``: the run did not finish (restarts exhausted, timed out): a liveness failure, with
  the diagnosis;
- ``not fired``: the run never reached the fault point, so it says nothing about the fault;
- ``n/a``: the fault does not exist under that protocol (no message bus to delete): not run.

The seed picks the generated data and the checkpoint the fault fires at, so a seed names a run.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.core.config import JobConfig
from runtime.core.fault_spec import FAULT_POINTS, FaultSpec
from runtime.core.json_doc import JsonObject
from runtime.lab.status import Status

if TYPE_CHECKING:
    from rich.table import Table

    from runtime.lab.results import JobResult
    from runtime.lab.verdicts import ExactlyOnce

PASSED, KNOWN, VIOLATION, FAILED = "passed", "known failure", "VIOLATION", "FAILED"
NOT_FIRED, NOT_APPLICABLE = "not fired", "n/a"
OUTCOMES = (PASSED, KNOWN, VIOLATION, FAILED, NOT_FIRED, NOT_APPLICABLE)

# the message each protocol's messaging faults hit: the one its commit path depends on; a
# checkpoint of -1 means the first such message (it carries no checkpoint id)
# The protocols whose writers wait for a CommitAckEvent in their own mailbox: P1's deadlock, which
# survives in the ckp_meta era (Hudi 0.11 to 1.0, and HUDI-6336 on top of it; docs/FIDELITY.md).
COMMIT_ACK_DEADLOCK = frozenset({"operator-event", "ckp-meta", "timeline-server"})
# (protocol, text of the error, what it is): the documented failures that end a job, in the
# simulator's exploration and in this matrix alike
KNOWN_FAILURES = (
    ("coordination-rpc", "#19902", "spurious task failure under a held table lock (#19902)"),
    # PR #3915 as shipped, after a region failover (docs/FIDELITY.md, P2 under region failover)
    (
        "message-bus",
        "No inflight instant when flushing data",
        "#3915: a restored task's flush reads a message whose instant the re-initialised coordinator abandoned",
    ),
    (
        "message-bus",
        "Receive an unexpected event for instant aborted",
        "#3915: an eager flush after an abort reads the literal 'aborted' as its instant",
    ),
    *(
        (
            p,
            "no CommitAckEvent ran",
            "P1's stall: no new instant after a lost or aborted completion, and no CommitAckEvent",
        )
        for p in sorted(COMMIT_ACK_DEADLOCK)
    ),
)


# PR #3915 as shipped (apache/hudi dbf8c44, hudi-flink): a restarted coordinator's
# StreamWriteOperatorCoordinator.start builds a MessageDriver, whose initialize deletes the whole bus,
# and initInstant writes message 0 only; a restored task's checkpointId is -1, set to k by
# snapshotState, so the barrier of the first checkpoint k after the restore reads message k - 1
# (AbstractStreamWriteFunction.prevCkp): absent. instantToWrite waits WRITE_COMMIT_ACK_TIMEOUT (the
# checkpoint timeout), so checkpoint k times out first and the coordinator writes k.aborted; the
# wait then assumes a silent cancel, and the second eager flush after the abort takes the literal
# 'aborted' as its instant ("Receive an unexpected event for instant aborted"): the job fails and
# the next restart does it again, a checkpoint timeout per restart and nothing committed.
MESSAGE_BUS_RESTART_STALL = (
    "#3915: after a global failover the restarted coordinator's MessageDriver emptied the bus, and a restored "
    "task's barrier waits for message k-1 (prevCkp) until the checkpoint timeout; each restart repeats it"
)
_BUS_WAIT = re.compile(r"message bus file (\d+)\.commit or \1\.aborted")


def known_stall(protocol: str, result: JobResult) -> str | None:
    """Which documented stall of ``protocol`` a run that did not finish in time shows: for the
    message bus, tasks waiting for a message that the coordinator restarted by the last global
    failover never wrote (its bus emptied at start); None when it is none."""
    if protocol != "message-bus" or result.status != Status.TIMED_OUT:
        return None
    wait = _BUS_WAIT.search(str(result.error or ""))
    restarts = [f for f in result.failovers if f.strategy == "global"]
    if wait is None or not restarts:
        return None
    restored = restarts[-1].restored_checkpoint or 0
    return MESSAGE_BUS_RESTART_STALL if int(wait.group(1)) >= restored else None


def known_failure(protocol: str, error: str) -> str | None:
    """Which of ``protocol``'s documented failures ``error`` (a failed run's, or a failover's
    cause) is; None when it is none of them."""
    return next((what for proto, marker, what in KNOWN_FAILURES if protocol == proto and marker in error), None)


# Hudi 1.1's coordinator checkpoints its event buffers when a checkpoint is triggered, before the
# tasks' write statuses of that checkpoint arrive, so a failure between checkpoint n's completion and
# the commit of its buffer restores a state without it: the checkpoint's rows are lost. #19215's
# reporter shows it with a failed commit, the lab with a failed DFS call or a crash in the commit.
INTERRUPTED_COMMIT_LOSS = {
    p: "Hudi 1.1 loses a completed checkpoint whose commit a failure interrupted (#19215; fixed after 1.1 by PR #19237)"
    for p in ("coordination-rpc", "coordination-rpc-async")
}

# Hudi 1.1's coordinator restores the event buffers of the checkpoint it restarts from
# (StreamWriteOperatorCoordinator.resetToCheckpoint -> EventBuffers.addEventsToBuffer); start ->
# restoreEvents -> recommitInstant skips a buffer whose instant already completed (the restored
# checkpoint's own completion committed it) but leaves it in eventBuffers, and the restored tasks'
# empty bootstraps (attempt > 0) clean only the keys from the restored checkpoint on
# (EventBuffers.cleanLegacyEvents); the next notifyCheckpointComplete -> commitInstants commits every
# key below it, that instant again, after the instants committed since.
RECOMMITTED_COMPLETED = {
    p: "Hudi 1.1 commits a restored, already completed instant a second time (restoreEvents keeps its "
    "event buffer; commitInstants commits it after later instants)"
    for p in ("coordination-rpc", "coordination-rpc-async")
}

# Data loss Hudi itself ships under one fault, reproduced on purpose: (protocol, fault) -> the reference.
KNOWN_LOSSES = {
    # not a filed issue: what Hudi's code does under the fault (docs/FIDELITY.md, "Write markers")
    (p, "message.dropped"): "Hudi's coordinator commits the write statuses it received when the checkpoint "
    "completes (StreamWriteOperatorCoordinator.notifyCheckpointComplete); a lost one is noticed when its ask "
    "times out, after that commit, and the restored task's bootstrap finds the instant completed"
    for p in ("operator-event", "message-bus", "ckp-meta")
}


def interrupted_commit(result: JobResult) -> int | None:
    """The completed checkpoint whose commit a failover interrupted, when there is one: the job
    restored it, and no commit carries it."""
    committed = {int(c["checkpoint"]) for c in result.commits}
    restored = (f.restored_checkpoint for f in result.failovers)
    return next((n for n in restored if n is not None and n not in committed), None)


def known_loss(protocol: str, fault: str | None, result: JobResult) -> str | None:
    """Which data loss of Hudi's own the unverified ``result`` shows (``fault``: the one fault the
    run injected, if any); None when it is none of them, so a bug of the lab's."""
    eo = result.exactly_once
    if eo is None or eo.duplicated or eo.unexpected or eo.mismatched or not eo.lost:
        return None  # Hudi's known losses lose rows, nothing else
    interrupted = interrupted_commit(result) if protocol in INTERRUPTED_COMMIT_LOSS else None
    if interrupted is not None:
        return f"{INTERRUPTED_COMMIT_LOSS[protocol]}: checkpoint {interrupted}'s commit"
    return KNOWN_LOSSES.get((protocol, fault or ""))


MESSAGE_TARGETS: dict[str, tuple[str, bool]] = {
    "operator-event": ("write_metadata", True),
    "ckp-meta": ("write_metadata", True),  # an operator event (CommitAckEvents go only after aborts)
    "message-bus": ("write_metadata", True),  # a writer's WriteMetadataEvent
    "timeline-server": ("refresh", False),  # the coordinator's refresh to the server
    "coordination-rpc": ("instant_time_request", True),
    "coordination-rpc-async": ("instant_time_request", True),
    "control-topic": ("append", False),  # a message to the control topic
}

# Faults whose purpose is a protocol's known failure, and how it shows.
SCENARIO_FAULTS = {
    "lock-held": "a cleaning action holds the table lock past the RPC timeout (#19902)",
    "quiet-round": "an empty round then data, completion notified late (P1 deadlock)",
    "wrong-instant": "region failover of every task as an instant starts, one task back 5 s late (HUDI-6194)",
}


def fault_checkpoint(seed: int, checkpoints: int) -> int:
    """The checkpoint a seed's fault fires at: 2 .. checkpoints-1 (never the first or last)."""
    span = max(1, checkpoints - 2)
    return 2 + (seed % span)


def applicable(protocol: str, fault: str, compacts: bool = False) -> bool:
    """Whether ``fault`` exists under ``protocol`` (the bus faults need a bus on the DFS) and the
    job's table (the compaction faults need a merge-on-read table that compacts)."""
    from runtime.protocols import get_protocol

    if fault.startswith("compaction."):
        return compacts
    if fault.startswith("control_topic."):
        return get_protocol(protocol).name == "control-topic"
    return not fault.startswith("bus.") or get_protocol(protocol).messages_on_dfs


def config_for(base: JobConfig, protocol: str, fault: str, seed: int, table: str) -> JobConfig:
    from runtime.faults.scenarios import lock_held_config, with_quiet_round, wrong_instant_config
    from runtime.lab.compare import one_commit_cadence

    # every protocol at one commit cadence, as compare runs them: Kafka Connect's 60 s interval
    # (scaled) would end a short run inside the first commit and no fault would fire
    cfg = one_commit_cadence(base).replace(protocol=protocol, seed=base.seed + seed, table=table)
    if fault == "lock-held":
        return lock_held_config(cfg)
    if fault == "quiet-round":
        return with_quiet_round(cfg)
    if fault == "wrong-instant":
        return wrong_instant_config(cfg)
    ckp = fault_checkpoint(seed, cfg.checkpoints)
    per_task = fault.startswith("task.") or fault in (
        "checkpoint.timeout",
        "bus.deleted_between_restarts",
        "control_topic.consumer_restarted",
    )
    task = seed % cfg.writers if per_task else -1
    target = ""
    if fault.startswith("message."):
        target, has_checkpoint = MESSAGE_TARGETS.get(protocol, ("write_metadata", True))
        ckp = ckp if has_checkpoint else -1
    return cfg.replace(faults=[FaultSpec(fault, ckp, task, target=target)])


def classify(protocol: str, fault: str, result: JobResult) -> tuple[str, str]:
    """(outcome, explanation) of one run."""
    eo = result.exactly_once
    verified = eo is not None and eo.verified
    status = result.status
    if status == Status.DEADLOCKED and result.deadlock is not None:
        d = result.deadlock
        if protocol in COMMIT_ACK_DEADLOCK:
            return KNOWN, f"P1's deadlock reproduced: {d.task} waits for {d.releasing_mail} in its own mailbox"
        return FAILED, f"unexpected deadlock in {d.task}: {d.waiting_for}"
    failovers = result.failovers
    if fault == "lock-held" and protocol == "coordination-rpc" and any("#19902" in (f.error or "") for f in failovers):
        verdict = "then recovered and verified" if verified else "and did not recover"
        return KNOWN, f"spurious restart reproduced (#19902), {verdict}"
    if status != Status.FINISHED:
        error = str(result.error or "")
        known = known_failure(protocol, error) if status == Status.FAILED else known_stall(protocol, result)
        if known is not None:
            return KNOWN, f"{known}: {error[:200]}"
        return FAILED, f"{status.value}: {error}"
    known = None if verified else known_loss(protocol, fault, result)
    if known is not None:
        return KNOWN, f"{known}: lost {eo and eo.lost}"
    if eo is None or not eo.verified:
        return VIOLATION, _violation(eo)
    if fault in FAULT_POINTS and not result.faults_fired:
        return NOT_FIRED, "the run never reached the fault point: it tells nothing about the fault"
    how = f"recovered after {len(failovers)} failover(s)" if failovers else "rode it out"
    return PASSED, how


def _violation(eo: ExactlyOnce | None) -> str:
    if eo is None:
        return "lost None, duplicated None, unexpected None, mismatched None, commit problems 0"
    return (
        f"lost {eo.lost}, duplicated {eo.duplicated}, unexpected "
        f"{eo.unexpected}, mismatched {eo.mismatched}, commit problems "
        f"{len(eo.commit_problems or [])} {eo.error or ''}"
    ).strip()


def replay_command(cfg: JobConfig, fault: str, seed: int) -> str:
    faults = ",".join(s.text() for s in cfg.faults)
    parts = [
        f"commitlab run --source {cfg.source} --protocol {cfg.protocol} --writers {cfg.writers}",
        f"--checkpoints {cfg.checkpoints} --records {cfg.records} --seed {cfg.seed}",
        f"--bucket-flush-rows {cfg.bucket_flush_rows} --checkpoint-timeout {cfg.checkpoint_timeout_s:g}",
        f"--rpc-timeout {cfg.rpc_timeout_s:g} --failover {cfg.failover}",
    ]
    if not cfg.hold_bootstraps:
        parts.append("--no-hold-bootstraps")
    if faults:
        parts.append(f"--faults {faults}")
    if fault in SCENARIO_FAULTS:
        parts.append(f"# scenario {fault}")
    return " ".join(parts)


@dataclass
class MatrixRun:
    """One cell of the matrix as ``faults.json`` records it."""

    protocol: str
    fault: str
    seed: int
    outcome: str
    explanation: str
    fired: list[Any] = field(default_factory=list)
    failovers: list[Any] = field(default_factory=list)
    status: str = "not run"
    commits: int = 0
    replay: str = ""

    def to_json(self) -> JsonObject:
        return asdict(self)


RunFn = Callable[[JobConfig, str], "JobResult"]


CELL_SEPARATOR = "__"


def cell_dir(out_dir: str, protocol_name: str, fault: str, seed: int) -> str:
    """Where one (protocol, fault, seed) run keeps its table and record."""
    return os.path.join(out_dir, f"{protocol_name}{CELL_SEPARATOR}{fault}{CELL_SEPARATOR}{seed}")


def earlier_cells(out_dir: str) -> list[str]:
    """The run folders an earlier matrix left in ``out_dir`` (a table each): a new run of the same
    cell would write into that table and judge what it holds as well."""
    if not os.path.isdir(out_dir):
        return []
    return sorted(
        name
        for name in os.listdir(out_dir)
        if name.count(CELL_SEPARATOR) == 2 and os.path.isdir(os.path.join(out_dir, name, "table"))
    )


def run_cell(base: JobConfig, out_dir: str, run: RunFn, fault: str, protocol: str, seed: int) -> MatrixRun:
    """Runs one (protocol, fault, seed) in its own directory and classifies the outcome; the
    record names the protocol by its class's ``name`` (``protocol`` may be a file's spec)."""
    from runtime.protocols import protocol_name

    name = protocol_name(protocol)
    if not applicable(protocol, fault, base.compacts):
        why = "no compaction on this table" if fault.startswith("compaction.") else "not under this protocol"
        return MatrixRun(name, fault, seed, NOT_APPLICABLE, why)
    sub = cell_dir(out_dir, name, fault, seed)
    cfg = config_for(base, protocol, fault, seed, os.path.join(sub, "table"))
    try:
        result = run(cfg, sub)
    except Exception as exc:  # noqa: BLE001 - a run that could not even start is a failure of that row, recorded
        error = f"{type(exc).__name__}: {exc}"
        return MatrixRun(name, fault, seed, FAILED, error, status="error", replay=replay_command(cfg, fault, seed))
    outcome, why = classify(protocol, fault, result)
    return MatrixRun(
        name,
        fault,
        seed,
        outcome,
        why,
        fired=result.faults_fired,
        failovers=[f.to_json() for f in result.failovers],
        status=result.status.value,
        commits=len(result.commits),
        replay=replay_command(cfg, fault, seed),
    )


def run_matrix(
    base: JobConfig,
    protocols: list[str],
    faults: list[str],
    seeds: int,
    out_dir: str,
    *,
    run: RunFn,
    on_run: Callable[[int, int, str], None] | None = None,
    parallel: int = 1,
) -> JsonObject:
    """Runs every (protocol, fault, seed), ``parallel`` at a time; writes ``out_dir/faults.json``
    (records in matrix order whatever the order they finished in)."""
    cells = [(fault, protocol, seed) for fault in faults for protocol in protocols for seed in range(seeds)]
    done = 0
    lock = threading.Lock()

    def one(cell: tuple[str, str, int]) -> JsonObject:
        nonlocal done
        rec = run_cell(base, out_dir, run, *cell)
        with lock:
            done += 1
            if on_run:
                on_run(done, len(cells), f"{rec.protocol} x {rec.fault} (seed {rec.seed})")
        return rec.to_json()

    t0 = time.monotonic()
    # runs are independent (a namespace and a table each); running two at once overlaps one
    # run's waits (timeouts, checkpoint intervals, actor start-up) with the other's work
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        records = list(pool.map(one, cells))
    from runtime.protocols import protocol_name

    doc = {
        "protocols": [protocol_name(p) for p in protocols],
        "faults": faults,
        "seeds": seeds,
        "parallel": parallel,
        "wall_s": round(time.monotonic() - t0, 1),
        "fault_points": {f: FAULT_POINTS.get(f) or SCENARIO_FAULTS.get(f) for f in faults},
        "runs": records,
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "faults.json"), "w") as f:
        json.dump(doc, f, indent=2, default=str)
    return doc


_COLOURS = {
    PASSED: "#4caf50",
    KNOWN: "#ffb300",
    VIOLATION: "#d32f2f",
    FAILED: "#7b1fa2",
    NOT_FIRED: "#9e9e9e",
    NOT_APPLICABLE: "#f5f5f5",
}


_CELL_LABELS = {KNOWN: "known", VIOLATION: "VIOL", FAILED: "fail", NOT_FIRED: "not fired", NOT_APPLICABLE: "n/a"}


def plot_heatmap(doc: JsonObject, out_dir: str) -> str:
    """Draws ``faults.png``: one cell per protocol x fault, its worst outcome over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = heatmap_figure(doc)
    path = os.path.join(out_dir, "faults.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def heatmap_figure(doc: JsonObject) -> Any:
    """The heat map as a matplotlib figure, laid out for any matrix size: the figure grows with the
    rows, the columns and the longest names, and matplotlib's constrained layout keeps the title,
    the rotated fault names and the legend (below, in as many rows as the width needs) inside it."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    protocols, faults = doc["protocols"], doc["faults"]
    cell = _worst_outcomes(doc["runs"])
    img = [[to_rgb(_COLOURS.get(cell.get((p, f), ""), "#eeeeee")) for f in faults] for p in protocols]
    longest_fault = max((len(f) for f in faults), default=0)
    width = max(8.0, 0.6 * len(faults) + 0.075 * max((len(p) for p in protocols), default=0) + 1.5)
    height = 0.45 * len(protocols) + 0.045 * longest_fault + 2.2
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    ax.imshow(img, aspect="auto")
    ax.set_xticks(range(len(faults)), faults, rotation=35, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_yticks(range(len(protocols)), protocols, fontsize=9)
    for i, p in enumerate(protocols):
        for j, f in enumerate(faults):
            outcome = cell.get((p, f))
            if outcome and outcome != PASSED:
                ax.text(j, i, _CELL_LABELS[outcome], ha="center", va="center", fontsize=7, color="black")
    fig.legend(
        handles=[Patch(color=c, label=o) for o, c in _COLOURS.items()],
        loc="outside lower center",
        ncol=6 if width >= 8.0 else 3,
        fontsize=8,
    )
    fig.suptitle(f"exactly-once under faults ({doc['seeds']} seed(s) per cell; worst outcome shown)", fontsize=11)
    return fig


def _worst_outcomes(runs: list[JsonObject]) -> dict[tuple[str, str], str]:
    """Each (protocol, fault)'s worst outcome over its seeds."""
    worst = {VIOLATION: 5, FAILED: 4, NOT_FIRED: 3, KNOWN: 2, PASSED: 1, NOT_APPLICABLE: 0}
    cell: dict[tuple[str, str], str] = {}
    for r in runs:
        key = (r["protocol"], r["fault"])
        if key not in cell or worst[r["outcome"]] > worst[cell[key]]:
            cell[key] = r["outcome"]
    return cell


def outcome_table(doc: JsonObject) -> Table:
    from rich.table import Table

    t = Table(title="commitlab faults", title_justify="left")
    for col in ("fault", "protocol", "seed", "outcome", "fired", "explanation"):
        t.add_column(col)
    style = {
        PASSED: "green",
        KNOWN: "yellow",
        VIOLATION: "bold red",
        FAILED: "magenta",
        NOT_FIRED: "dim",
        NOT_APPLICABLE: "dim",
    }
    for r in doc["runs"]:
        fired = ", ".join(f"{f['point']}@{f['checkpoint']}" for f in r["fired"]) or "-"
        t.add_row(
            r["fault"],
            r["protocol"],
            str(r["seed"]),
            f"[{style[r['outcome']]}]{r['outcome']}[/{style[r['outcome']]}]",
            fired,
            r["explanation"] + (f"\n  replay: {r['replay']}" if r["outcome"] in (VIOLATION, FAILED) else ""),
        )
    return t
