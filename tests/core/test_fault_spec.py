"""Fault specs: their text form, and which message a message fault may take."""

from __future__ import annotations

import pytest

from runtime.core.fault_spec import FaultSpec


def test_fault_specs_read_back_from_their_text():
    from runtime.core.fault_spec import parse_faults

    text = "task.in_snapshot@2#0,message.dropped:operator_event@3,dfs.latency=0.5,message.delayed#1=1.5"
    specs = parse_faults(text)
    assert ",".join(s.text() for s in specs) == text
    assert specs[1].target == "operator_event" and specs[2].value == 0.5
    assert parse_faults("dfs.latency")[0].value == 0.2  # the point's default
    with pytest.raises(ValueError, match="only message.dropped and message.delayed take a :target"):
        parse_faults("task.in_snapshot:write_metadata")
    with pytest.raises(ValueError, match="cannot read fault"):
        parse_faults("task.in_snapshot@two")


def test_a_message_without_a_checkpoint_never_takes_a_fault_meant_for_one(sim):
    from runtime.faults.injector import FaultInjector
    from runtime.faults.points import ArmedFaultPoints

    class _Msg:
        def __init__(self, ckp: int) -> None:
            self.checkpoint_id = ckp

    env = sim.env("coordinator")
    injector = FaultInjector([FaultSpec("message.dropped", 3, target="operator_event")], "coordinator", None, "")
    faults = env.faults = ArmedFaultPoints(injector, env)
    assert faults.message_fault("writer-0", "operator_event", None) is None  # no checkpoint id
    assert faults.message_fault("writer-0", "operator_event", _Msg(2)) is None
    assert faults.message_fault("writer-0", "write_metadata", _Msg(3)) is None  # another target
    spec = faults.message_fault("writer-1", "operator_event", _Msg(3))
    assert spec is not None and injector.fired[0]["task"] == 1  # the writer at the other end
