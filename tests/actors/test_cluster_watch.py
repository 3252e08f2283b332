"""The driver's watch on its Ray cluster's head (actors/cluster_watch.py), on a fake clock and a
fake GCS: a head silent past the grace is lost, one busy for less is not, one slow probe is no
silence, a local GCS that exited is lost at once, a probe that cannot work is switched off; the
watch runs on its own thread, and either the driver's loop or the watch ends the run, once; and
--cluster-lost-after must leave the record time before Ray ends the driver."""

from __future__ import annotations

import threading

import pytest
import ray

from actors.cluster_watch import MIN_UNANSWERED, ClusterWatch, EndClaim, check_cluster_lost_after
from runtime.core.config import ConfigError
from runtime.lab.results import ClusterLost


class FakeGcs:
    """Answers, or raises Ray's RpcError as a GCS client's call past its timeout does."""

    def __init__(self) -> None:
        self.up = True
        self.calls = 0

    def probe(self) -> None:
        self.calls += 1
        if not self.up:
            raise ray.exceptions.RpcError("Timed out while waiting for GCS to become available.")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _polls(watch: ClusterWatch, clock: Clock, seconds: float, step: float = 0.25):
    """The watch's steps over ``seconds`` of the fake clock; the first lost cluster, or None."""
    end = clock.now + seconds
    while clock.now < end:
        lost = watch.observe()
        if lost is not None:
            return lost
        clock.now += step
    return None


def _watch(gcs: FakeGcs, clock: Clock, ended: list[str] | None = None) -> ClusterWatch:
    gone = ended if ended is not None else []
    return ClusterWatch(
        10.0, "10.0.0.1:6379", gcs.probe, ended=lambda: gone[0] if gone else None, clock=clock, period_s=1.0
    )


def test_a_head_that_answers_is_never_lost_and_is_probed_once_a_second():
    gcs, clock = FakeGcs(), Clock()
    watch = _watch(gcs, clock)
    assert (_polls(watch, clock, 30)) is None
    assert 25 <= gcs.calls <= 31


def test_a_silent_head_is_lost_after_the_grace_and_one_busy_for_less_is_not():
    gcs, clock = FakeGcs(), Clock()
    watch = _watch(gcs, clock)
    gcs.up = False
    assert _polls(watch, clock, 8) is None  # busy 8 s of a 10 s grace
    gcs.up = True
    assert _polls(watch, clock, 5) is None  # it answered: the silence starts again
    gcs.up = False
    lost = _polls(watch, clock, 15)
    assert lost is not None and 10.0 <= lost.unreachable_s <= 11.5, lost
    assert lost.gcs_address == "10.0.0.1:6379"
    assert "did not answer" in lost.seen and "--cluster-lost-after 10" in lost.seen and "RpcError" in lost.seen


def test_one_slow_probe_is_no_silence():
    """A probe that timed out once, then nothing probed for longer than the grace (the clock
    jumped): fewer than MIN_UNANSWERED timed out, so the head is not lost."""
    gcs, clock = FakeGcs(), Clock()
    watch = _watch(gcs, clock)
    gcs.up = False
    assert watch.observe() is None
    clock.now += 30.0
    watch.period_s = 1e9  # no further probe
    assert watch.unanswered < MIN_UNANSWERED and watch.observe() is None


def test_the_loop_or_else_the_watch_ends_the_run_once():
    loop_first = EndClaim()
    assert loop_first.claim(EndClaim.LOOP) and loop_first.claim(EndClaim.LOOP)
    assert not loop_first.left_to_the_watch(0.0) and loop_first.by == EndClaim.LOOP
    stuck_loop = EndClaim()
    assert stuck_loop.left_to_the_watch(0.05)  # no claim from the loop: the watch ends the run
    assert not stuck_loop.claim(EndClaim.LOOP)  # a loop that gets free later leaves it to the watch


def test_the_watch_runs_on_a_thread_of_its_own_and_reports_once():
    gcs = FakeGcs()
    gcs.up = False
    watch = ClusterWatch(0.3, "10.0.0.1:6379", gcs.probe, ended=lambda: None, period_s=0.05)
    seen: list[ClusterLost] = []
    reported = threading.Event()
    watch.start(lambda lost: (seen.append(lost), reported.set()), poll_s=0.02)
    assert reported.wait(10)
    watch.stop()
    assert len(seen) == 1 and "did not answer" in seen[0].seen


def test_a_local_gcs_that_exited_is_lost_at_once():
    gcs, clock, ended = FakeGcs(), Clock(), []
    watch = _watch(gcs, clock, ended)
    assert (_polls(watch, clock, 2)) is None
    ended.append("its gcs_server process (pid 7) exited (status -9)")
    lost = _polls(watch, clock, 1)
    assert lost is not None and lost.seen.startswith("its gcs_server process")


def test_a_probe_that_cannot_work_here_is_switched_off_and_never_declares_a_loss():
    clock = Clock()

    def broken() -> None:
        raise AttributeError("no internal_kv_get")

    watch = ClusterWatch(10.0, "?", broken, ended=lambda: None, clock=clock)
    assert (_polls(watch, clock, 30)) is None
    assert watch.probe is None


def test_the_grace_must_leave_the_record_time_before_ray_ends_the_driver():
    check_cluster_lost_after(10.0, {})
    check_cluster_lost_after(10.0, {"RAY_gcs_rpc_server_reconnect_timeout_s": "20"})
    with pytest.raises(ConfigError, match=r"--cluster-lost-after 40: .* 60 s .* give --cluster-lost-after 30 or less"):
        check_cluster_lost_after(40.0, {})
    with pytest.raises(ConfigError, match=r"RAY_gcs_rpc_server_reconnect_timeout_s here.*give --cluster-lost-after 5"):
        check_cluster_lost_after(10.0, {"RAY_gcs_rpc_server_reconnect_timeout_s": "10"})
