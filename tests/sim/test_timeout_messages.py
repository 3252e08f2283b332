"""A transport timeout that fires says which option changes it, on one line, and at defaults it
waits a transport deadline (not Flink's 10 s scaled down to 0.5 s)."""

from __future__ import annotations

from runtime.core.config import JobConfig
from runtime.core.fault_spec import parse_faults
from runtime.sim import simulate


def test_a_lost_checkpoint_ack_fails_the_task_after_the_rpc_timeout_and_names_it():
    cfg = JobConfig(
        source="generator",
        writers=2,
        checkpoints=4,
        records=2_000,
        protocol="operator-event",
        faults=parse_faults("message.dropped:ack_checkpoint@2#0"),
    )
    result = simulate(cfg, seed=1, storage="memory")
    assert result.status == "finished" and result.exactly_once.verified
    (failover,) = result.failovers
    assert "writer-0 waited 10.0s for the reply of job-manager.ack_checkpoint (--rpc-timeout)" in failover.error
    assert "\n" not in failover.error
