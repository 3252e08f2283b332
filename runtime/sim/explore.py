"""Exploration: many seeds, a random schedule each, invariants checked after every run.

:func:`run_seed` draws the seed's schedule (:mod:`runtime.sim.schedule`), simulates it with the
same seed driving the network, and :func:`judge` checks the invariants on the result:

* ``exactly-once``: a finished run's table holds the expected state (nothing lost, duplicated,
  unexpected or mismatched);
* ``no-deadlock``: no task blocked past the deadlock threshold on a mail of its own mailbox. The
  protocols whose writers wait for a CommitAckEvent (P1, ckp-meta, timeline-server: Hudi 0.10 to
  1.0) are known to deadlock: there it is a *known failure*, elsewhere a violation;
* ``one-instant-per-checkpoint``: where the protocol promises it (coordination-rpc), the writers
  of one checkpoint are never given two instants (seen on the simulated network);
* ``ascending-commits``: commits land in ascending checkpoint order.

A run that ends otherwise (failed, timed out), or that only finished thanks to a failover no
injected crash caused, is ``FAILED``: a liveness failure, reported with its diagnosis, unless it is
a protocol's documented failure (``KNOWN_FAILURES``). Every failure carries its seed, a short trace
excerpt around the violation and the command that replays it. The outcome names are those of ``commitlab faults``.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, NotRequired, TypedDict

from runtime.core.config import JobConfig, flag_of
from runtime.core.jobs_spec import JobsSpec
from runtime.core.json_doc import JsonObject
from runtime.job.prepare import ResolvedJob
from runtime.lab.fault_matrix import (
    FAILED,
    KNOWN,
    PASSED,
    VIOLATION,
)
from runtime.lab.results import JobResult
from runtime.sim.chooser import Chooser
from runtime.sim.host import simulate
from runtime.sim.judge import (
    MAX_REAL_S,
    InstantProbe,
    Verdict,
    judge,
)
from runtime.sim.prepare import prepare_config
from runtime.sim.recorder import DROPPED, Event
from runtime.sim.schedule import SimSchedule, draw

EXCERPT_EVENTS = 24
KNOWN_KEPT = 10  # known failures kept in full in explore.json


def format_event(ev: Event) -> str:
    t, kind, role, *rest = ev
    if kind in ("X", "i", "s", "f") and len(rest) >= 3:
        thread, cat, name = rest[0], rest[1], rest[2]
        text = f"{role} [{thread}] {name}" + (f" ({cat})" if cat else "")
    elif kind in ("deliver", "reply", "reply-error", "reply-late", "send-error") and len(rest) >= 3:
        text = f"{role} -> {rest[0]}: {rest[1]} {rest[2]}"
    else:
        text = " ".join([str(role), *(str(x) for x in rest)])
    return f"{t / 1e9:10.6f}s {kind:<11} {text}"[:220]


def excerpt(
    events: list[Event], role: str | None = None, n: int = EXCERPT_EVENTS, at_failover: bool = False
) -> list[str]:
    """The last ``n`` events before the run's verdict (``at_failover``: before the first
    failover, which the failure caused); with ``role``, those involving it (the deadlocked task:
    what it ran, what reached it)."""
    if at_failover:
        first = next((i for i, e in enumerate(events) if e[1] == "host" and len(e) > 3 and e[3] == "failover"), None)
        if first is not None:
            events = events[: first + 1]
    body = [e for e in events if e[1] != "host"]
    if role is not None:
        mine = [e for e in body if role in (e[2], e[3] if len(e) > 3 else None)]
        body = mine or body
    end = [e for e in events if e[1] == "host"][-1:]
    return [format_event(e) for e in body[-n:] + end]


# -- one seed ---------------------------------------------------------------------------------------


def replay_command(
    scenario: str,
    seed: int,
    protocol: str,
    storage: str = "memory",
    schedule_file: str | None = None,
    allow_empty_commit: str = "release",
    jobs: JobsSpec | None = None,
    options: Options = (),
) -> str:
    cmd = f"commitlab replay --seed {seed} --protocol {protocol}"
    cmd += f" --schedule {schedule_file}" if schedule_file else f" --scenario {scenario}"
    cmd += f" --allow-empty-commit {allow_empty_commit}" if allow_empty_commit != "release" else ""
    cmd += options_flags(options) + jobs_flags(jobs)
    return cmd + (" --real-parquet" if storage == "disk" else "")


# JobConfig fields a run's base configuration may set beside the schedule (--concurrency-mode,
# --lock-provider, --table-type), as (field, value) pairs: what explore, replay and check pass on
Options = tuple[tuple[str, str], ...]
OPTION_FIELDS = ("concurrency_mode", "lock_provider", "instant_times", "table_type")


def options_flags(options: Options) -> str:
    """The flags of ``options``, for a replay command."""
    return "".join(f" {flag_of(k)} {v}" for k, v in options if v)


def jobs_flags(jobs: JobsSpec | None) -> str:
    """The flags that give a replay the same jobs on its table ("" for one job)."""
    if jobs is None or not jobs.several:
        return ""
    out = f" --table-jobs {jobs.jobs}"
    return out + (f" --jobs-overlap {jobs.overlap}" if jobs.overlap != "none" else "")


def run_schedule(
    schedule: SimSchedule,
    protocol: str,
    seed: int,
    *,
    storage: str = "memory",
    workdir: str | None = None,
    base: JobConfig | None = None,
    chooser: Chooser | None = None,
    jobs: JobsSpec | None = None,
    prepared: ResolvedJob | None = None,
    hash_trace: bool = True,
    check_prefix: bool = True,
    cut: Callable[[], bool] | None = None,
) -> tuple[Verdict, JobResult]:
    """Simulates ``schedule`` for ``protocol`` with ``seed``; returns the verdict and the result
    (with its trace). ``chooser``: who decides the run (``RandomChooser(seed)`` if None);
    ``jobs``: several jobs on the table (:mod:`runtime.sim.jobs_explore`); ``prepared``: the
    job of ``schedule``, ``protocol`` and ``base`` as :func:`prepared_schedule` made it already
    (a search runs one job thousands of times); ``hash_trace=False``: the record does not hash
    its trace (:func:`~runtime.sim.host.simulate`; a search's runs, which nobody reads by hash);
    ``check_prefix=False``: an unfinished run's commits are not checked one by one (the judge
    does not read them: a search's runs); ``cut``: a search's run it cut short raises
    :class:`~runtime.sim.host.RunCut`, unjudged (:func:`~runtime.sim.host.simulate`)."""
    if jobs is not None and jobs.several:
        from runtime.sim.jobs_explore import run_jobs_schedule

        return run_jobs_schedule(
            schedule,
            protocol,
            seed,
            jobs,
            storage=storage,
            workdir=workdir,
            base=base,
            chooser=chooser,
            hash_trace=hash_trace,
            cut=cut,
        )
    cfg = prepared if prepared is not None else schedule.config(protocol, base)
    probe = InstantProbe()
    result = simulate(
        cfg,
        seed=seed,
        workdir=workdir,
        storage=storage,
        trace=True,
        delay=_delay(schedule.delay),
        max_real_s=MAX_REAL_S,
        reply_probes=[probe],
        chooser=chooser,
        hash_trace=hash_trace,
        check_prefix=check_prefix,
        cut=cut,
    )
    lost = sum(1 for e in result.sim.trace or () if e[1] == DROPPED) if result.sim is not None else 0
    return judge(protocol, result, probe.by_key, lost=lost), result


def prepared_schedule(schedule: SimSchedule, protocol: str, base: JobConfig | None, storage: str) -> ResolvedJob:
    """The job :func:`run_schedule` runs for ``schedule`` and ``protocol`` on ``storage``, built
    and checked (:func:`~runtime.sim.prepare.prepare_config`), to hand to it as ``prepared``."""
    return prepare_config(schedule.config(protocol, base), None, storage)


def _delay(text: str) -> Any:
    from runtime.sim.network import Delay

    return Delay.parse(text)


class SeedRun(TypedDict):
    """One run of an exploration as explore.json keeps it; a failing run also carries the command
    that replays it, its trace's last events and its schedule."""

    seed: int
    protocol: str
    outcome: str
    invariant: str | None
    detail: str
    status: str
    commits: list[int]
    virtual_s: float
    trace_sha256: str
    schedule: str
    replay: NotRequired[str]
    trace_excerpt: NotRequired[list[str]]
    schedule_json: NotRequired[JsonObject]
    _real_s: NotRequired[float]  # moved to the timing section by explore()


def run_seed(
    scenario: str,
    seed: int,
    protocol: str,
    *,
    storage: str = "memory",
    workdir: str | None = None,
    allow_empty_commit: str = "release",
    jobs: JobsSpec | None = None,
    options: Options = (),
) -> SeedRun:
    """One exploration run: the record explore.json keeps for it (failures with their excerpt).
    ``allow_empty_commit``: hoodie.allow.empty.commit, as ``--allow-empty-commit`` takes it;
    ``jobs``: several jobs on the table (``--table-jobs``)."""
    schedule = draw(scenario, seed)
    t = time.perf_counter()
    base = JobConfig(allow_empty_commit=allow_empty_commit).replace(**dict(options))
    verdict, result = run_schedule(schedule, protocol, seed, storage=storage, workdir=workdir, base=base, jobs=jobs)
    real_s = time.perf_counter() - t
    rec = SeedRun(
        seed=seed,
        protocol=protocol,
        outcome=verdict.outcome,
        invariant=verdict.invariant,
        detail=verdict.detail,
        status=result.status.value,
        commits=[int(c["checkpoint"]) for c in result.commits],
        virtual_s=result.sim.virtual_s,
        trace_sha256=result.sim.trace_sha256,
        schedule=schedule.describe(),
    )
    if verdict.outcome != PASSED:
        rec["replay"] = replay_command(
            scenario, seed, protocol, storage, allow_empty_commit=allow_empty_commit, jobs=jobs, options=options
        )
        rec["trace_excerpt"] = excerpt(result.sim.trace or [], verdict.role, at_failover=verdict.at_failover)
        rec["schedule_json"] = schedule.to_dict()
    rec["_real_s"] = real_s  # moved to the timing section by explore()
    return rec


# scenario, seed, protocol, storage, workdir, empty commits, jobs on the table, base options
Task = tuple[str, int, str, str, str | None, str, JobsSpec | None, Options]


def _run_seed_task(task: Task) -> SeedRun:
    scenario, seed, protocol, storage, workdir, empty, jobs, options = task
    return run_seed(
        scenario, seed, protocol, storage=storage, workdir=workdir, allow_empty_commit=empty, jobs=jobs, options=options
    )


def default_jobs(runs: int) -> int:
    """Worker processes for ``runs`` runs: one per CPU, but no pool for a handful of runs (starting
    a worker, which imports Arrow, costs about as much as a few simulations)."""
    return 1 if runs < 8 else max(1, min(os.cpu_count() or 1, runs))


def _records(tasks: list[Task], jobs: int) -> Iterator[SeedRun]:
    """The runs' records, in task order, from ``jobs`` worker processes (or this one)."""
    if jobs <= 1:
        for t in tasks:
            yield _run_seed_task(t)
        return
    # spawned, not forked: a fork of a process whose Arrow thread pools are running can hang.
    # A worker that dies (e.g. killed for memory) raises BrokenProcessPool here, never a hang.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        try:
            # each run is bounded by its own real-time guard (MAX_REAL_S), so the map is too
            yield from pool.map(_run_seed_task, tasks, chunksize=1)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def explore(
    scenario: str,
    seeds: list[int],
    protocols: list[str],
    *,
    storage: str = "memory",
    workdir: str | None = None,
    jobs: int | None = None,
    on_run: Callable[[SeedRun], None] | None = None,
    allow_empty_commit: str = "release",
    table_jobs: JobsSpec | None = None,
    options: Options = (),
) -> JsonObject:
    """Runs every (protocol, seed), in ``jobs`` worker processes (None: :func:`default_jobs`);
    ``table_jobs``: several jobs on each run's table (``--table-jobs``);
    returns the explore.json document. Everything but ``timing`` is a pure function of the
    arguments: each run is its own seeded simulation, whichever process runs it."""
    tasks: list[Task] = []
    for protocol in protocols:
        for seed in seeds:
            wd = os.path.join(workdir, f"{protocol}-{seed}") if storage == "disk" and workdir else None
            tasks.append((scenario, seed, protocol, storage, wd, allow_empty_commit, table_jobs, options))
    jobs = default_jobs(len(tasks)) if jobs is None else max(1, min(jobs, len(tasks)))
    runs = []
    real = []
    t0 = time.perf_counter()
    for rec in _records(tasks, jobs):
        real.append(rec.pop("_real_s"))
        runs.append(rec)
        if on_run is not None:
            on_run(rec)
    total = time.perf_counter() - t0
    counts: dict[str, dict[str, int]] = {}
    for r in runs:
        c = counts.setdefault(r["protocol"], {PASSED: 0, KNOWN: 0, VIOLATION: 0, FAILED: 0})
        c[r["outcome"]] += 1
    return {
        "scenario": scenario,
        "allow_empty_commit": allow_empty_commit,
        "table_jobs": table_jobs.jobs if table_jobs is not None else 1,
        **({"options": dict(options)} if options else {}),
        "protocols": protocols,
        "seeds": len(seeds),
        "first_seed": seeds[0] if seeds else None,
        "storage": storage,
        "counts": counts,
        "failures": [r for r in runs if r["outcome"] in (VIOLATION, FAILED)],
        # the known failures found (P1's deadlock): the first few in full, as findings to read
        "known_failures": [r for r in runs if r["outcome"] == KNOWN][:KNOWN_KEPT],
        "known_failure_seeds": [r["seed"] for r in runs if r["outcome"] == KNOWN],
        "runs": [{k: v for k, v in r.items() if k not in ("trace_excerpt", "schedule_json")} for r in runs],
        "timing": {
            "real_s": round(total, 3),
            "runs": len(runs),
            "jobs": jobs,
            "per_run_s_mean": round(sum(real) / max(1, len(real)), 4),
            "per_run_s_max": round(max(real, default=0.0), 4),
        },
    }


# -- restart scenarios: a second job on the table an earlier one wrote -------------------------------
#
# Not random schedules: each is two jobs in sequence on one table (on the real disk, so both
# table types and the official reader apply), the second started as a user restarts a Flink job.
# They are the shapes of the Iceberg Flink sink's restart issues, for a protocol that records its
# job and checkpoint in its commits (two-phase-commit); any protocol runs them.

RESTART_JOB_ID = "job-a"  # a job id fixed across runs, as the Kubernetes operator's application mode does
RESTART_SCENARIOS: dict[str, str] = {
    "restore-older-checkpoint": (
        "#10892: the second job starts from checkpoint 3 of the first, which committed 5; its "
        "checkpoints 4 and 5 hold other data than the first job's"
    ),
    "restart-without-state": "#18098: the second job starts without state, its checkpoint ids from 1 again",
    "changed-job-id": "#16011: the second job starts from the first's last checkpoint under another job id",
}


def restart_jobs(scenario: str, protocol: str, table_type: str, job_id: str) -> tuple[JobConfig, JobConfig]:
    """The two jobs of ``scenario``: rows are a function of their offset (same seed and keys),
    so what the second job does not ingest again the first committed already."""
    if scenario not in RESTART_SCENARIOS:
        raise ValueError(f"unknown restart scenario {scenario!r}; choose one of {', '.join(RESTART_SCENARIOS)}")
    common: dict[str, Any] = dict(
        protocol=protocol, table_type=table_type, writers=2, keys=2_500, bucket_flush_rows=400
    )
    first = JobConfig(**common, records=5_000, checkpoints=5, job_id=job_id)
    if scenario == "restore-older-checkpoint":  # bigger rounds: its checkpoints 4, 5 reach new offsets
        return first, JobConfig(**common, records=8_000, checkpoints=5, job_id=job_id, from_checkpoint=3)
    if scenario == "restart-without-state":
        return first, JobConfig(**common, records=8_000, checkpoints=5, job_id=job_id)
    return first, JobConfig(**common, records=8_000, checkpoints=8, job_id="job-b", from_checkpoint=5)


def run_restart_scenario(
    scenario: str, protocol: str, workdir: str, *, table_type: str = "copy-on-write", job_id: str = RESTART_JOB_ID
) -> tuple[Verdict, JobResult, JobResult]:
    """Runs both jobs of ``scenario`` on the table under ``workdir``; the verdict is the second's."""
    first_cfg, second_cfg = restart_jobs(scenario, protocol, table_type, job_id)
    first = simulate(first_cfg, seed=0, workdir=workdir, storage="disk", max_real_s=MAX_REAL_S)
    if first.status != "finished":
        return Verdict(FAILED, None, f"the first job: {first.status.value}: {first.error}"), first, first
    second = simulate(second_cfg, seed=0, workdir=workdir, storage="disk", max_real_s=MAX_REAL_S, existing_table=True)
    earlier = {c["instant"] for c in first.commits}  # the second job's own commits are judged
    own = dataclasses.replace(second, commits=[c for c in second.commits if c["instant"] not in earlier])
    return judge(protocol, own), first, second


def restart_replay_command(scenario: str, protocol: str, table_type: str, job_id: str = RESTART_JOB_ID) -> str:
    """The Ray host's two commands that run ``scenario`` (the simulator: :func:`run_restart_scenario`)."""
    first, second = restart_jobs(scenario, protocol, table_type, job_id)

    def flags(cfg: JobConfig) -> str:
        out = f"--records {cfg.records} --checkpoints {cfg.checkpoints}"
        out += f" --job-id {cfg.job_id}" if cfg.job_id else ""
        return out + (f" --from-checkpoint {cfg.from_checkpoint}" if cfg.from_checkpoint else "")

    run = (
        f"commitlab run --protocol {protocol} --table-type {table_type} --writers 2 --keys 2500 "
        "--bucket-flush-rows 400 --source generator --table T"
    )
    return f"{run} --out A {flags(first)} && {run} --out B {flags(second)}"
