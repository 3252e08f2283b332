"""Two jobs on one table under the simulator: the merged verdict, #19357, a damaged table."""

from __future__ import annotations

import glob
import os

import pytest

from runtime.cli import main
from runtime.core.config import JobConfig
from runtime.core.dfs import open_dfs
from runtime.core.fault_spec import parse_faults
from runtime.core.jobs_spec import JobsSpec
from runtime.faults.scenarios import job_restart_overlap
from runtime.flink.state_backend import StateBackend
from runtime.lab.jobs_result import conflict_failovers
from runtime.lab.status import Status
from runtime.sim.multi_job import job_streams, simulate_jobs, verify_jobs

SMALL = dict(protocol="coordination-rpc", writers=1, checkpoints=3, records=600)


def _share(result, job):
    return next(s for s in result.shares if s.job == job)


def test_two_jobs_one_after_the_other_verify_both_streams_merged(tmp_path):
    cfg = JobConfig(**SMALL)
    # the second starts after the first finished: nothing of the first is pending
    result = simulate_jobs(cfg, JobsSpec(jobs=2, start_s=(0.0, 3.0)), seed=0, workdir=str(tmp_path))
    assert result.status == Status.FINISHED
    assert result.verified, result.verdict_line()
    assert [s.expected for s in result.shares] == [300, 300]  # 600 records, 300 keys each
    assert result.exactly_once.expected == 600
    assert all(s.intact for s in result.shares)
    assert [len(j.commits) for j in result.jobs] == [3, 3]  # each job's own commits


def test_job_restart_overlap_loses_the_old_jobs_rows_under_single_writer():
    """#19357: the restarted job's EAGER rollbackFailedWrites removes the old job's pending
    instant, which the old coordinator then commits: job 1's rows are lost, job 2's intact."""
    cfg, spec = job_restart_overlap(JobConfig(**SMALL))
    result = simulate_jobs(cfg, spec, seed=0, storage="memory")
    assert result.status == Status.FINISHED
    assert not result.verified
    old, new = _share(result, "job-1"), _share(result, "job-2")
    assert old.lost + old.mismatched > 0 and new.intact
    assert "job-1" in result.verdict_line() and "job-2" not in result.verdict_line()
    last = result.jobs[0].commits[-1]["instant"]
    assert last in result.jobs[1].rolled_back  # the new job rolled back what the old one committed


def test_the_verdict_names_the_job_whose_commit_was_removed(tmp_path):
    cfg = JobConfig(**SMALL)
    spec = JobsSpec(jobs=2, start_s=(0.0, 3.0))
    result = simulate_jobs(cfg, spec, seed=0, workdir=str(tmp_path))
    assert result.verified, result.verdict_line()
    table = str(tmp_path / "table")
    last = result.jobs[1].commits[-1]["instant"]
    (commit_file,) = glob.glob(os.path.join(table, ".hoodie", "**", f"{last}*.commit"), recursive=True)
    os.remove(commit_file)  # job 2's last commit is gone from the timeline
    verdict, shares = verify_jobs(cfg.replace(table=table), job_streams(cfg, spec))
    assert not verdict.verified
    by_job = {s.job: s for s in shares}
    assert by_job["job-1"].intact
    assert by_job["job-2"].lost + by_job["job-2"].mismatched > 0


def test_overlapping_keys_expect_the_merge_rules_winner_across_jobs(tmp_path):
    cfg = JobConfig(**SMALL)
    spec = JobsSpec(jobs=2, overlap="keys", start_s=(0.0, 3.0))
    result = simulate_jobs(cfg, spec, seed=0, workdir=str(tmp_path))
    assert result.verified, result.verdict_line()
    assert result.exactly_once.expected == 300  # one row per shared key
    assert sum(s.expected for s in result.shares) == 300


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--jobs", "3"], "--jobs 3"),
        (["--jobs", "0"], "--jobs 0"),
        (["--jobs", "2", "--jobs-start", "0,x"], "--jobs-start"),
        (["--jobs", "2", "--jobs-start", "0,1,2"], "--jobs-start"),
        (["--jobs", "2", "--writer-guard", "lab-lock"], "--writer-guard none"),
    ],
)
def test_bad_jobs_options_exit_2_naming_the_flag(tmp_path, capsys, argv, says):
    code = main(["simulate", "--out", str(tmp_path / "out"), *argv])
    assert code == 2
    assert says in capsys.readouterr().out.replace("\n", "")
    assert not os.path.exists(tmp_path / "out" / "table")


def test_an_explored_seed_of_two_jobs_replays_with_both_jobs_on_its_table(capsys):
    from runtime.sim.explore import replay_command, run_seed

    rec = run_seed("lock-held", 2, "coordination-rpc", jobs=JobsSpec(jobs=2))
    assert rec["outcome"] != "passed"  # both jobs' EAGER rollbacks remove each other's files
    assert rec["replay"].endswith("--table-jobs 2")
    assert "job-" in rec["detail"]
    assert main(rec["replay"].split()[1:]) == 1
    out = capsys.readouterr().out
    assert "job-2/" in out and rec["detail"][:40] in out.replace("\n", "")
    keys = replay_command("lock-held", 2, "coordination-rpc", jobs=JobsSpec(jobs=2, overlap="keys"))
    assert keys.endswith("--table-jobs 2 --jobs-overlap keys")


def test_job_restart_overlap_keeps_every_row_under_the_multi_writer_fix():
    """The same overlap under optimistic: LAZY failed writes with per-instant heartbeats leave the
    old job's pending instant alone (its heartbeat is alive), so its commit stands."""
    cfg, spec = job_restart_overlap(JobConfig(**SMALL, concurrency_mode="optimistic"))
    result = simulate_jobs(cfg, spec, seed=0, storage="memory")
    assert result.verified, result.verdict_line()
    assert [j.rolled_back for j in result.jobs] == [[], []]


@pytest.mark.parametrize("overlap", ["none"])
def test_two_concurrent_jobs_verify_under_optimistic(tmp_path, overlap):
    cfg = JobConfig(**SMALL, concurrency_mode="optimistic")
    result = simulate_jobs(cfg, JobsSpec(jobs=2, overlap=overlap), seed=0, workdir=str(tmp_path))
    assert result.status == Status.FINISHED
    assert result.verified, result.verdict_line()


def test_an_in_process_lock_cannot_stand_between_two_simulated_jobs(tmp_path, capsys):
    argv = ["simulate", "--jobs", "2", "--concurrency-mode", "optimistic", "--lock-provider", "in-process"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert "--lock-provider filesystem" in capsys.readouterr().out.replace("\n", "")


@pytest.mark.parametrize(
    "argv",
    [
        ["--jobs", "3"],
        ["--jobs", "2", "--writer-guard", "lab-lock"],
        ["--jobs", "2", "--concurrency-mode", "optimistic", "--from-checkpoint", "1"],
        ["--jobs", "2", "--concurrency-mode", "optimistic", "--input", "in.parquet"],
    ],
)
def test_run_refuses_jobs_it_cannot_run_before_ray_starts(tmp_path, capsys, argv):
    out = tmp_path / "out"
    assert main(["run", "--source", "generator", "--out", str(out), *argv]) == 2
    said = capsys.readouterr().out.replace("\n", "")
    assert "--jobs" in said or "--writer-guard" in said
    assert not (out / "table").exists()


def test_the_bound_1_counterexample_of_two_single_writer_jobs_replays_and_optimistic_passes_it(tmp_path):
    """``check --table-jobs 2``'s counterexample under single-writer (one late message from job
    1's coordinator; job 2's EAGER rollback deletes a file job 1 still merges onto) fails when
    replayed, and the same deviation passes under optimistic (LAZY: nothing rolled back)."""
    from runtime.sim.schedule import SimSchedule
    from runtime.sim.search import CheckJob, run_deviations

    schedule = SimSchedule(writers=1, rounds=[100, 100])  # check --writers 1 --checkpoints 2
    two = JobsSpec(jobs=2)
    failing = run_deviations(CheckJob(schedule, "coordination-rpc", jobs=two), ((39, 1),))
    assert failing.verdict.failing and failing.verdict.detail.startswith("job-1:"), failing.verdict
    optimistic = (("concurrency_mode", "optimistic"),)
    fixed = run_deviations(CheckJob(schedule, "coordination-rpc", jobs=two, options=optimistic), ((39, 1),))
    assert fixed.verdict.outcome == "passed", fixed.verdict


def test_two_jobs_on_hudi_0x_instant_times_collide_and_1x_keeps_them_apart():
    """The 0.x generator reads the millisecond clock without the lock: two coordinators take the
    same instant time, the second job's commit of it fails and its checkpoint is lost (the
    verdict names job 2). 1.x reads the clock inside the lock: distinct instants, verified."""
    base = JobConfig(**SMALL, concurrency_mode="optimistic")
    old = simulate_jobs(base.replace(instant_times="0.x"), JobsSpec(jobs=2), seed=2, storage="memory")
    first_instants = [c["instant"] for c in old.jobs[0].commits]
    assert any(f.error and first_instants[0] in f.error for f in old.jobs[1].failovers)  # job 2 took it too
    assert not old.verified and "job-2" in old.verdict_line() and _share(old, "job-1").intact
    new = simulate_jobs(base.replace(instant_times="1.x"), JobsSpec(jobs=2), seed=2, storage="memory")
    assert new.verified, new.verdict_line()


def test_each_job_restores_its_own_checkpoints_after_a_failover(tmp_path):
    """Flink keeps a job's checkpoints under its job id: job 2 (started half a second after job 1)
    fails over and restores its own last checkpoint, not job 1's, whose sources stood elsewhere
    (with one store for both, job 2 lost 200 of its 400 rows)."""
    cfg = JobConfig(**{**SMALL, "checkpoints": 4, "records": 800}, concurrency_mode="optimistic")
    spec = JobsSpec(jobs=2, start_s=(0.0, 0.5), overrides=({}, {"faults": parse_faults("task.before_flush@3")}))
    result = simulate_jobs(cfg, spec, seed=0, workdir=str(tmp_path))
    assert result.status == Status.FINISHED
    assert [len(j.failovers) for j in result.jobs] == [0, 1]
    assert result.verified, result.verdict_line()
    dfs, base = open_dfs(str(tmp_path / "table"), role="verifier")
    assert all(StateBackend(dfs, base, job).completed() for job in ("job-1", "job-2"))
    assert StateBackend(dfs, base).list_ids() == []  # nothing in the store of a job given no id


def test_two_optimistic_jobs_on_the_same_file_groups_lose_only_the_conflicting_commits_checkpoint():
    """Copy-on-write, both jobs' keys in the same file groups: each instant's merge reads the file
    group's latest committed base file, the other job's included (Hudi's merge handle asks the
    instant's file-system view), so a job whose commits all succeed keeps every row. The second to
    commit an overlapping instant gets HoodieWriteConflictException and fails over; the rows of
    that completed checkpoint are Hudi 1.1's known loss (#19215), which the verdict names."""
    cfg = JobConfig(**SMALL, concurrency_mode="optimistic", table_type="copy-on-write")
    result = simulate_jobs(cfg, JobsSpec(jobs=2, overlap="file-groups"), seed=0, storage="memory")
    assert result.status == Status.FINISHED
    conflicted = {str(j.config["job_id"]) for j in result.jobs if conflict_failovers(j)}
    assert conflicted == {"job-2"}, result.verdict_line()
    # (job 2 once merged onto its own remembered version, dropping the rows job 1 had committed)
    assert _share(result, "job-1").intact, result.verdict_line()
    loser = _share(result, "job-2")
    assert loser.lost and not (loser.mismatched or loser.duplicated or loser.unexpected)
    line = result.verdict_line()
    assert line.startswith("KNOWN LOSS") and "job-2: Hudi 1.1 loses a completed checkpoint" in line and "#19215" in line


def test_a_delta_commit_completing_after_the_other_jobs_compaction_was_scheduled_joins_its_slice(tmp_path):
    """Merge-on-read with compaction on, seed 0: job 1 schedules a compaction while job 2's delta
    commit is in flight; the plan leaves that commit's log files out (they are not completed), and
    the commit completes after the compaction instant, its completion time taken under the lock
    after every time on the timeline (Hudi 1.x's ``ActiveTimelineV2.createCompleteFileInMetaPath``
    from the ``TimeGenerator``), so its log files join the compacted file slice
    (``HoodieFileGroup.addLogFile`` by completion time) and no row is lost."""
    cfg = JobConfig(**{**SMALL, "records": 1200}, table_type="merge-on-read", concurrency_mode="non-blocking")
    assert cfg.compacts
    result = simulate_jobs(cfg, JobsSpec(jobs=2), seed=0, workdir=str(tmp_path))
    timeline = os.listdir(tmp_path / "table" / ".hoodie" / "timeline")
    (compaction,) = [n.split(".")[0] for n in timeline if n.endswith(".compaction.requested")]
    completed = [n.split(".")[0].split("_") for n in timeline if n.endswith(".deltacommit") and "_" in n]
    assert any(instant < compaction < done for instant, done in completed)  # in flight across the schedule
    assert result.verified, result.verdict_line()


def test_a_coordinator_whose_start_raises_fails_the_job_over_instead_of_ending_the_replay(capsys):
    """A restarted coordinator's recommit that meets a write conflict raises in its start: on Ray
    that is a RayTaskError and the job fails over; the simulated host does the same and the
    replay ends with a verdict naming the cause (before: a CommitError traceback)."""
    argv = "replay --seed 4 --scenario random --protocol coordination-rpc --table-jobs 2"
    code = main([*argv.split(), "--jobs-overlap", "keys", "--concurrency-mode", "optimistic"])
    out = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in out.out + out.err
    assert "RoleStartFailed: coordinator: CommitError" in out.out
