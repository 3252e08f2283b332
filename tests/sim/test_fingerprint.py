"""The state fingerprint keeps what each event adds to a role's history for the whole process
(runtime.sim.fingerprint._LOCALS): a later run must get the states a fresh process would."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.sim import fingerprint
from runtime.sim.fingerprint import StateFingerprint


def _events(instants: tuple[str, str]) -> list[tuple[Any, ...]]:
    return [
        (1, "deliver", "writer-0", "coordinator", "handle_event", "WriteMetadataEvent(ckp=1)", 7),
        (2, "X", "coordinator", "coordinator", "instant", f"start instant {instants[0]}", 0.0, 0.0, None),
        (3, "mail", "writer-1", "checkpoint"),
        (4, "reply", "coordinator", "writer-1", "handle_event", "None", 8),
        (5, "X", "coordinator", "coordinator", "instant", f"start instant {instants[1]}", 0.0, 0.0, None),
        (6, "X", "writer-0", "mailbox", "mail", "flush", 0.0, 0.0, None),
    ]


def _states(events: list[tuple[Any, ...]], symmetry: bool) -> list[int]:
    """The fingerprint after each event, as a run folds them one choice point at a time."""
    fp = StateFingerprint(symmetry=symmetry)
    trace: list[tuple[Any, ...]] = []
    fp.attach(type("Trace", (), {"events": trace})())
    out = []
    for ev in events:
        trace.append(ev)
        out.append(fp())
    return out


@pytest.mark.parametrize("symmetry", [True, False])
def test_a_later_run_meets_the_states_a_fresh_process_meets(symmetry: bool) -> None:
    early, late = ("20260101000000004", "20260101000001288"), ("20260101000001288", "20260101000000004")
    fingerprint._LOCALS[symmetry].clear()
    fresh = {order: _states(_events(order), symmetry) for order in (early, late)}
    fingerprint._LOCALS[symmetry].clear()
    warm = {order: _states(_events(order), symmetry) for order in (early, late, early)}
    assert warm == fresh
    assert fingerprint._LOCALS[symmetry]  # the events without an instant were kept
    # the instants' ranks are the run's own: the same events with the instants swapped reach
    # the same states (both runs met them in the order first, second)
    assert fresh[early] == fresh[late]
