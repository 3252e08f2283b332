"""What ``commitlab check`` writes to ``check.json``: the certificate of a bounded search, or the
shortest counterexample it found.

The certificate says how much was explored (runs, distinct states, transitions, the longest run
in choice points, the real time, the bound) and, per invariant, whether it holds in every schedule
within the bound that the search covered, was violated, or failed the protocol's documented way
(a known failure). A search stopped early (Ctrl-C, ``--max-runs``, ``--max-seconds``) keeps its
certificate, marked partial with the reason: "holds" then covers only the runs made.
"""

from __future__ import annotations

from runtime.core.json_doc import JsonObject
from runtime.sim.chooser import ChoicePoint
from runtime.sim.explore import jobs_flags, options_flags
from runtime.sim.search import LIVENESS, BoundedSearch, CheckJob, CheckRun, invariants_of
from runtime.sim.strategies import format_deviations

__all__ = ["certificate", "replay_command", "run_record"]

HOLDS = "holds within the bound"
VIOLATED = "violated"
KNOWN_FAILURE = "known failure"


def replay_command(job: CheckJob, schedule_file: str, run: CheckRun) -> str:
    """The command that re-runs ``run`` alone (its deviations from the default schedule)."""
    cmd = f"commitlab check --protocol {job.protocol} --schedule {schedule_file} --seed {job.seed}"
    cmd += f" --late-s {job.late_s:g}" if job.late_s != 0.5 else ""
    cmd += "" if job.ready_order else " --messages-only"
    cmd += f" --lose {','.join(job.lossy)}" if job.lossy else ""
    cmd += options_flags(job.options) + jobs_flags(job.jobs)
    return cmd + f" --replay '{format_deviations(run.deviations)}'"


def run_record(job: CheckJob, run: CheckRun, schedule_file: str) -> JsonObject:
    """A run as the report shows it: its verdict, deviations, replay command, trace excerpt and,
    for a deadlock, the watchdog's wait-for diagnosis."""
    rec: JsonObject = {
        "outcome": run.verdict.outcome,
        "invariant": run.verdict.invariant,
        "detail": run.verdict.detail,
        "status": run.status,
        "deviations": [_deviation(run, i, a) for i, a in run.deviations],
        "events": run.events,
        "timeouts_fired": run.timeouts,
        "replay": replay_command(job, schedule_file, run),
        "trace_excerpt": run.excerpt,
    }
    if run.deadlock is not None:
        rec["wait_for"] = run.deadlock
    return rec


def _deviation(run: CheckRun, index: int, alt: int) -> JsonObject:
    """A deviation as the report names it: a late message from a sender, or the ready queue's
    ``alt``-th callback run first."""
    choice = run.choices[index] if index < len(run.choices) else None
    if choice is None:
        return {"choice": index, "alternative": alt, "kind": None, "what": "beyond the run's choice points"}
    if choice.point is ChoicePoint.MESSAGE_LOSS:
        what = f"a message from {choice.stream} is lost"
    elif choice.stream:
        what = f"a message from {choice.stream} arrives late"
    else:
        what = f"ready callback {alt} runs first"
    return {"choice": index, "alternative": alt, "kind": choice.point.value, "what": what}


def _invariants(search: BoundedSearch) -> JsonObject:
    out: JsonObject = {}
    known = {r.verdict.invariant or LIVENESS for r in search.known}
    for name in invariants_of(search.job.protocol):
        if name in search.violated:
            out[name] = VIOLATED
        elif name in known:
            out[name] = KNOWN_FAILURE
        else:
            out[name] = HOLDS
    return out


def certificate(search: BoundedSearch, schedule_file: str = "check.json") -> JsonObject:
    """The check.json document of a finished (or stopped) search."""
    job, s = search.job, search.stats
    doc: JsonObject = {
        "protocol": job.protocol,
        "schedule": job.schedule.to_dict(),
        "schedule_described": job.schedule.describe(),
        "seed": job.seed,
        "late_s": job.late_s,
        "symmetry": job.symmetry,
        "ready_order_searched": job.ready_order,
        "lossy_methods": list(job.lossy),
        "table_jobs": job.jobs.jobs if job.jobs is not None else 1,
        "options": dict(job.options),
        "certificate": {
            "bound": search.bound,
            "complete": search.complete,
            "stopped": search.stopped,
            "runs": s.runs,
            "distinct_states": len(s.states),
            "transitions": s.transitions,
            "max_depth": s.max_depth,
            "most_deviations_run": s.deepest_deviations,
            "pruned": s.pruned,
            "real_s": round(s.real_s, 2),
            "invariants": _invariants(search),
            "recovered_by_timeout": len(search.recovered_by_timeout),
            "known_failures": len(search.known),
            "failures": len(search.failures),
        },
    }
    shortest = search.shortest(search.failures)
    if shortest is not None:
        doc["counterexample"] = run_record(job, shortest, schedule_file)
    # each violated invariant's own shortest run: the overall shortest may break another one
    others = {name: run for name, run in search.violated.items() if run is not shortest}
    if others:
        doc["counterexamples_by_invariant"] = {n: run_record(job, r, schedule_file) for n, r in others.items()}
    known = search.shortest(search.known)
    if known is not None:
        doc["known_failure"] = run_record(job, known, schedule_file)
    by_timeout = search.shortest(search.recovered_by_timeout)
    if by_timeout is not None:
        doc["recovered_by_timeout"] = run_record(job, by_timeout, schedule_file)
    return doc
