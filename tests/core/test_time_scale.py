"""One time scale: every Hudi/Flink default duration times --time-scale; an explicit value wins;
Hudi's ack timeout is the checkpoint timeout; a transport deadline is never scaled below its floor."""

from __future__ import annotations

import pytest

from runtime.core import codec
from runtime.core.config import ConfigError, JobConfig
from runtime.core.durations import DEFAULT_TIME_SCALE, TRANSPORT_DEADLINE_FLOORS_S


def test_the_default_scale_multiplies_hudi_and_flink_defaults():
    cfg = JobConfig()
    assert cfg.time_scale == DEFAULT_TIME_SCALE == 0.05
    assert cfg.wait_tick_s == pytest.approx(1.0 * 0.05)
    assert cfg.checkpoint_timeout_s == pytest.approx(600.0 * 0.05)
    assert cfg.rpc_timeout_s == 10.0  # a transport deadline: not below Flink's own 10 s
    assert cfg.checkpoint_interval_s == pytest.approx(4.0 * 0.05)
    assert cfg.write_status_timeout_s == pytest.approx(300.0 * 0.05)


def test_the_commit_ack_and_instant_wait_timeouts_are_the_checkpoint_timeout_as_in_hudi():
    cfg = JobConfig()
    assert cfg.commit_ack_timeout_s == cfg.checkpoint_timeout_s == cfg.instant_wait_timeout
    cfg = JobConfig(checkpoint_timeout_s=7.0)
    assert cfg.commit_ack_timeout_s == 7.0 and cfg.instant_wait_timeout_s == 7.0


def test_another_scale_scales_everything_and_an_explicit_flag_wins():
    cfg = JobConfig(time_scale=1.0, rpc_timeout_s=3.0)
    assert cfg.checkpoint_timeout_s == 600.0 and cfg.wait_tick_s == 1.0 and cfg.commit_ack_timeout_s == 600.0
    assert cfg.rpc_timeout_s == 3.0
    assert cfg.explicit_durations == ["rpc_timeout_s"]


def test_replace_with_a_new_scale_rescales_what_was_not_set():
    cfg = JobConfig(rpc_timeout_s=3.0).replace(time_scale=0.5)
    assert cfg.checkpoint_timeout_s == 300.0 and cfg.rpc_timeout_s == 3.0
    # other changes keep the durations as they are
    assert cfg.replace(writers=4).checkpoint_timeout_s == 300.0


def test_effective_durations_for_the_result():
    eff = JobConfig(time_scale=0.1).effective_durations()
    assert eff == {
        "time_scale": 0.1,
        "wait_tick_s": pytest.approx(0.1),
        "checkpoint_timeout_s": pytest.approx(60.0),
        "checkpoint_interval_s": pytest.approx(0.4),
        "rpc_timeout_s": 10.0,
        "write_status_timeout_s": pytest.approx(30.0),
        "kafka_commit_interval_s": pytest.approx(6.0),
        "commit_ack_timeout_s": pytest.approx(60.0),
        "instant_wait_timeout_s": pytest.approx(60.0),
        "rpc_timeout_floor_s": 10.0,
    }


def test_a_config_crosses_the_wire_with_its_effective_values():
    cfg = JobConfig(time_scale=0.2, wait_tick_s=0.3)
    back = codec.roundtrip(cfg)
    assert back.effective_durations() == cfg.effective_durations()
    assert back.explicit_durations == ["wait_tick_s"]


def test_a_bad_scale_is_named():
    with pytest.raises(ConfigError, match="--time-scale must be positive"):
        JobConfig(time_scale=0.0)
    with pytest.raises(ConfigError, match="--max-concurrent-checkpoints"):
        JobConfig(max_concurrent_checkpoints=0).validate()


def test_a_new_checkpoint_timeout_carries_the_timeouts_that_follow_it():
    """Hudi's commit-ack and instant-wait timeouts default to the checkpoint timeout: a copy with
    another checkpoint timeout (a scenario that needs more room) moves them too, but not an
    explicit one."""
    cfg = JobConfig(checkpoint_timeout_s=4.0).replace(checkpoint_timeout_s=15.0)
    assert cfg.instant_wait_timeout_s == cfg.commit_ack_timeout_s == 15.0
    kept = JobConfig(checkpoint_timeout_s=4.0, instant_wait_timeout_s=2.0).replace(checkpoint_timeout_s=15.0)
    assert kept.instant_wait_timeout_s == 2.0 and kept.commit_ack_timeout_s == 15.0


@pytest.mark.parametrize("scale", [0.001, 0.01, 0.05, 0.5, 1.0, 3.0])
def test_a_transport_deadline_is_never_below_its_floor_while_model_waits_scale(scale):
    """256 writers acking one job manager on a busy 2-core host missed a 0.5 s ask timeout (Flink's
    10 s x 0.05) and the job failed over: how long the peer's host takes to answer does not shrink
    with the time scale, so neither does the deadline that declares it dead. The model's waits do."""
    cfg = JobConfig(time_scale=scale)
    for name, floor in TRANSPORT_DEADLINE_FLOORS_S.items():
        assert getattr(cfg, name) == max(floor, 10.0 * scale) >= floor
        assert getattr(cfg.replace(time_scale=scale / 10), name) >= floor  # a rescaled copy too
    assert cfg.wait_tick_s == pytest.approx(1.0 * scale)
    assert cfg.checkpoint_timeout_s == pytest.approx(600.0 * scale)
    assert cfg.commit_ack_timeout_s == cfg.instant_wait_timeout_s == cfg.checkpoint_timeout_s
    assert cfg.write_status_timeout_s == pytest.approx(300.0 * scale)


def test_an_explicit_transport_deadline_below_the_floor_is_kept():
    """Fault scenarios set a short --rpc-timeout so a lost message costs little: the flag wins."""
    cfg = JobConfig(rpc_timeout_s=0.5)
    assert cfg.rpc_timeout_s == 0.5 and cfg.replace(time_scale=1.0).rpc_timeout_s == 0.5


def test_a_transport_deadline_grows_with_the_callers_one_role_answers():
    """Every write task calls the job manager, the coordinator and the control topic: at 256 of
    them on a busy host one role answers past Flink's 10 s, so the floor is 0.1 s per writer."""
    assert JobConfig(writers=100).rpc_timeout_s == 10.0
    wide = JobConfig(writers=256)
    assert wide.rpc_timeout_s == pytest.approx(25.6)
    assert wide.effective_durations()["rpc_timeout_floor_s"] == pytest.approx(25.6)
    assert JobConfig().replace(writers=256).rpc_timeout_s == pytest.approx(25.6)  # a copy re-derives it
    assert JobConfig(rpc_timeout_s=2.0).replace(writers=256).rpc_timeout_s == 2.0  # the flag still wins
    assert wide.checkpoint_timeout_s == JobConfig().checkpoint_timeout_s  # model waits do not grow
