"""The driver's watch on its Ray cluster's head (actors/cluster_watch.py), on a fake clock and a
fake GCS: a head silent past the grace is lost, one busy for less is not, a watchdog that did not
run is no silence, a local GCS that exited is lost at once, a probe that cannot work is switched
off; and --cluster-lost-after must leave the record time before Ray ends the driver."""

from __future__ import annotations

import asyncio

import pytest
import ray

from actors.cluster_watch import MIN_UNANSWERED, ClusterWatch, check_cluster_lost_after
from runtime.core.config import ConfigError


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


async def _polls(watch: ClusterWatch, clock: Clock, seconds: float, step: float = 0.25):
    """The watchdog's polls over ``seconds`` of the fake clock; the first lost cluster, or None."""
    end = clock.now + seconds
    while clock.now < end:
        lost = watch.check()
        if lost is not None:
            return lost
        await asyncio.sleep(0.01)  # the probe's thread runs
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
    assert asyncio.run(_polls(watch, clock, 30)) is None
    assert 25 <= gcs.calls <= 31


def test_a_silent_head_is_lost_after_the_grace_and_one_busy_for_less_is_not():
    async def run():
        gcs, clock = FakeGcs(), Clock()
        watch = _watch(gcs, clock)
        gcs.up = False
        assert await _polls(watch, clock, 8) is None  # busy 8 s of a 10 s grace
        gcs.up = True
        assert await _polls(watch, clock, 5) is None  # it answered: the silence starts again
        gcs.up = False
        lost = await _polls(watch, clock, 15)
        assert lost is not None and 10.0 <= lost.unreachable_s <= 11.5, lost
        assert lost.gcs_address == "10.0.0.1:6379"
        assert "did not answer" in lost.seen and "--cluster-lost-after 10" in lost.seen and "RpcError" in lost.seen

    asyncio.run(run())


def test_a_watchdog_that_did_not_run_counts_no_silence():
    """The driver's loop busy for longer than the grace sent no probe: no silence was seen."""

    async def run():
        gcs, clock = FakeGcs(), Clock()
        watch = _watch(gcs, clock)
        gcs.up = False
        assert watch.check() is None  # one probe out, unanswered
        await asyncio.sleep(0.01)
        clock.now += 30.0  # the loop did not run for 30 s
        assert watch.unanswered < MIN_UNANSWERED
        assert watch.check() is None  # one unanswered probe is no lost cluster

    asyncio.run(run())


def test_a_local_gcs_that_exited_is_lost_at_once():
    gcs, clock, ended = FakeGcs(), Clock(), []
    watch = _watch(gcs, clock, ended)
    assert asyncio.run(_polls(watch, clock, 2)) is None
    ended.append("its gcs_server process (pid 7) exited (status -9)")
    lost = asyncio.run(_polls(watch, clock, 1))
    assert lost is not None and lost.seen.startswith("its gcs_server process")


def test_a_probe_that_cannot_work_here_is_switched_off_and_never_declares_a_loss():
    clock = Clock()

    def broken() -> None:
        raise AttributeError("no internal_kv_get")

    watch = ClusterWatch(10.0, "?", broken, ended=lambda: None, clock=clock)
    assert asyncio.run(_polls(watch, clock, 30)) is None
    assert watch.probe is None


def test_the_grace_must_leave_the_record_time_before_ray_ends_the_driver():
    check_cluster_lost_after(10.0, {})
    check_cluster_lost_after(10.0, {"RAY_gcs_rpc_server_reconnect_timeout_s": "20"})
    with pytest.raises(ConfigError, match=r"--cluster-lost-after 40: .* 60 s .* give --cluster-lost-after 30 or less"):
        check_cluster_lost_after(40.0, {})
    with pytest.raises(ConfigError, match=r"RAY_gcs_rpc_server_reconnect_timeout_s here.*give --cluster-lost-after 5"):
        check_cluster_lost_after(10.0, {"RAY_gcs_rpc_server_reconnect_timeout_s": "10"})
