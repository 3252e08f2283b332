"""The timeline picture and the trace-event checker, on real traces from the simulator (no Ray).

The deadlock schedule under P1 (operator events) deadlocks writer-0; under P2 (message bus) the same
schedule commits. Both runs write a Chrome trace with ``simulate(..., chrome_trace_path=...)``.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from runtime.core import trace_events
from runtime.core.config import JobConfig
from runtime.core.trace import Tracer, write_trace
from runtime.faults.scenarios import deadlock_config
from runtime.lab.timeline_plot import normalize_events, plot_timeline, render_timeline, validate_trace
from runtime.sim import simulate

SEED = 1


def _run(tmp_path_factory, protocol: str) -> tuple[dict, dict]:
    work = tmp_path_factory.mktemp(protocol)
    trace_path = str(work / "trace.json")
    cfg = deadlock_config(JobConfig(source="generator", protocol=protocol, writers=2))
    result = simulate(
        cfg, seed=SEED, workdir=str(work / "run"), chrome_trace_path=trace_path, verify=False, max_real_s=120.0
    )
    with open(trace_path) as f:
        return result, json.load(f)


@pytest.fixture(scope="module")
def p1_run(tmp_path_factory):
    return _run(tmp_path_factory, "operator-event")


@pytest.fixture(scope="module")
def p2_run(tmp_path_factory):
    return _run(tmp_path_factory, "message-bus")


def _red(png: str) -> np.ndarray:
    import matplotlib.image as mpimg

    img = mpimg.imread(png)  # floats in [0, 1], RGBA
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return (r > 0.8) & (g < 0.15) & (b < 0.15)


def _red_in(mask: np.ndarray, rows: tuple[int, int], cols: tuple[int, int]) -> int:
    return int(mask[rows[0] : rows[1] + 1, cols[0] : cols[1] + 1].sum())


def test_deadlock_trace_is_valid_and_the_picture_shows_it(p1_run, tmp_path):
    result, doc = p1_run
    assert result.status == "deadlocked"
    dl = result.deadlock
    assert validate_trace(doc) == []

    png = str(tmp_path / "timeline.png")
    plot = render_timeline(
        doc,
        png,
        title="P1 on the deadlock schedule",
        deadlock=dl.to_json(),
        checkpoints=result.to_json()["checkpoints"],
    )
    assert plot.path == png and os.path.getsize(png) > 10_000
    assert plot.lanes[:2] == ["writer-0", "writer-1"] and plot.lanes[2:4] == ["coordinator", "job-manager"]
    assert plot.deadlock_label == f"DEADLOCK: waits for {dl.releasing_mail} in its own mailbox"
    assert "CommitAckEvent" in plot.deadlock_label
    assert plot.counts["commit"] == len(result.commits) == 1
    assert plot.counts["flush"] > 0 and plot.counts["step"] > 0
    assert plot.counts["ckp_complete"] == result.figures.checkpoints.completed == 2
    # the picture spans the wait to the moment it was found
    assert plot.duration_s >= dl.blocked_s

    red = _red(png)
    assert red.shape == (plot.size_px[1], plot.size_px[0])
    cols = plot.x_pixels
    in_lane = _red_in(red, plot.lane_pixels[dl.task], cols)
    lane_h = plot.lane_pixels[dl.task][1] - plot.lane_pixels[dl.task][0]
    width = cols[1] - cols[0]
    # a solid red bar over most of the lane, for most of the run: visible at a glance
    assert in_lane > 0.3 * lane_h * width, (in_lane, lane_h, width)
    for other in plot.lanes:
        if other != dl.task:
            assert _red_in(red, plot.lane_pixels[other], cols) < 0.02 * in_lane, other
    # drawn to the end of the run, from after the barrier of checkpoint 2 (the wait is in round
    # 3's first flush): red columns of the lane, inside the time axis
    top, bottom = plot.lane_pixels[dl.task]
    red_cols = cols[0] + np.flatnonzero(red[top : bottom + 1, cols[0] : cols[1] + 1].any(axis=0))
    assert plot.time_of(red_cols.max()) >= plot.duration_s - 0.01
    ckp2 = next(m.t for m in plot.checkpoint_marks if m.kind == "trigger" and m.checkpoint == 2)
    assert plot.time_of(red_cols.min()) > ckp2
    assert plot.time_of(red_cols.max()) - plot.time_of(red_cols.min()) >= dl.blocked_s - 0.01


def test_message_bus_trace_is_valid_and_has_no_deadlock(p2_run, tmp_path):
    result, doc = p2_run
    assert result.status == "finished"
    assert validate_trace(doc) == []

    png = str(tmp_path / "timeline.png")
    plot = render_timeline(
        doc,
        png,
        title="P2 on the deadlock schedule",
        deadlock=result.to_json()["deadlock"],
        checkpoints=result.to_json()["checkpoints"],
    )
    assert os.path.getsize(png) > 10_000
    assert plot.deadlock_label is None
    assert plot.counts["commit"] == len(result.commits) == 2
    assert plot.counts["ckp_complete"] == 3 and plot.counts["ckp_trigger"] == 3
    # each writer waited (ended) for the message file of checkpoint 2: red, but no deadlock
    assert plot.counts["blocked"] == 2
    red = _red(png)
    for w in ("writer-0", "writer-1"):
        assert _red_in(red, plot.lane_pixels[w], plot.x_pixels) > 0
    assert plot_timeline(doc, str(tmp_path / "again.png")) == str(tmp_path / "again.png")


def _raw(doc: dict, t0_us: float = 1.75e15) -> list[dict]:
    """The events as each role's tracer recorded them: pid = role, tid = thread, absolute ts."""
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    return [
        dict(e, pid=procs[e["pid"]], tid=threads[(e["pid"], e["tid"])], ts=e["ts"] + t0_us)
        for e in doc["traceEvents"]
        if e["ph"] != "M"
    ]


def test_raw_and_written_events_draw_the_same(p1_run, tmp_path):
    result, doc = p1_run
    raw = _raw(doc)
    a, b = normalize_events(doc), normalize_events(raw)
    assert len(a) == len(b) > 0
    shift = a[0].t - b[0].t  # raw events start at 0, the written trace at its own origin
    assert all(
        (x.process, x.thread, x.name, x.ph) == (y.process, y.thread, y.name, y.ph) and abs(x.t - y.t - shift) < 1e-6
        for x, y in zip(a, b, strict=True)
    )
    pa = render_timeline(doc, str(tmp_path / "a.png"), deadlock=result.to_json()["deadlock"])
    pb = render_timeline(raw, str(tmp_path / "b.png"), deadlock=result.to_json()["deadlock"])
    assert pa.counts == pb.counts and pa.lanes == pb.lanes
    assert pa.deadlock_label == pb.deadlock_label
    # what write_trace makes of raw events is valid too
    out = str(tmp_path / "rewritten.json")
    write_trace(out, raw)
    with open(out) as f:
        assert validate_trace(json.load(f)) == []


def test_tracer_events_with_a_flow_validate(tmp_path):
    clock = iter(float(i) for i in range(100))
    tr = Tracer("writer-0", clock=lambda: next(clock))
    tr.complete("step", 1.0, 1.5, thread="mailbox", cat="default action")
    tr.complete("blocked: instant", 1.5, 2.0, thread="mailbox", cat="blocked")
    tr.instant("checkpoint 1 complete", thread="checkpoints")
    tr.flow("event", 7, start=True)
    tr.flow("event", 7, start=False)
    path = str(tmp_path / "t.json")
    write_trace(path, tr.drain())
    with open(path) as f:
        doc = json.load(f)
    assert validate_trace(doc) == []
    plot = render_timeline(doc, str(tmp_path / "t.png"))
    assert plot.counts["blocked"] == 1 and plot.counts["step"] == 1


def test_renamed_checkpoint_events_keep_their_lines(p1_run, tmp_path):
    """The picture reads a checkpoint's events by their args: a new name (people read names in
    Perfetto) draws the same checkpoint lines."""
    result, doc = p1_run
    renamed = {
        "traceEvents": [
            dict(e, name=f"renamed {i}") if trace_events.CHECKPOINT_PHASE in (e.get("args") or {}) else e
            for i, e in enumerate(doc["traceEvents"])
        ]
    }
    assert renamed != doc
    before = render_timeline(doc, str(tmp_path / "a.png"), deadlock=result.deadlock.to_json())
    after = render_timeline(renamed, str(tmp_path / "b.png"), deadlock=result.deadlock.to_json())
    assert after.checkpoint_marks == before.checkpoint_marks
    assert {m.kind for m in after.checkpoint_marks} == {"trigger", "complete"}
    assert after.counts == before.counts


def test_checkpoints_and_failovers_are_read_from_args_not_names(tmp_path):
    clock = iter(float(i) for i in range(100))
    jm = Tracer("job-manager", clock=lambda: next(clock))
    for ckp, phase in ((1, trace_events.TRIGGERED), (1, trace_events.COMPLETED), (2, trace_events.TRIGGERED)):
        jm.instant(f"ckp {ckp} went {phase}", thread="checkpoints", args=trace_events.checkpoint_args(ckp, phase))
    jm.instant("gave up on 2", thread="checkpoints", args=trace_events.checkpoint_args(2, trace_events.ABORTED))
    driver = Tracer("job")
    for name, at, phase in (("job down: crash", 3.5, trace_events.FAILED), ("up", 4.5, trace_events.RESTARTED)):
        args = trace_events.failover_args(1, phase)
        driver.instant(name, thread="failover", cat=trace_events.FAILOVER, args=args, at=at)
    plot = render_timeline(jm.drain() + driver.drain(), str(tmp_path / "t.png"))
    marks = sorted((m.kind, m.checkpoint) for m in plot.checkpoint_marks)
    assert marks == [("abort", 2), ("complete", 1), ("trigger", 1), ("trigger", 2)]
    assert plot.counts["failover"] == 1 and plot.counts["instant"] == 0


def test_only_a_deadlock_and_no_events(tmp_path):
    plot = render_timeline(
        [],
        str(tmp_path / "x.png"),
        deadlock={"task": "writer-3", "blocked_s": 4.0, "releasing_mail": "CommitAckEvent(ckp=5)"},
    )
    assert "writer-3" in plot.lanes and plot.deadlock_label.startswith("DEADLOCK: waits for CommitAckEvent")
    assert os.path.getsize(plot.path) > 0
    empty = render_timeline({"traceEvents": []}, str(tmp_path / "y.png"))
    assert empty.deadlock_label is None and os.path.getsize(empty.path) > 0


_OK_X = {"ph": "X", "name": "a", "cat": "run", "ts": 0, "dur": 5, "pid": 1, "tid": 1}
_META = {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "writer-0"}}


def _doc(*events) -> dict:
    return {"traceEvents": [_META, *events], "displayTimeUnit": "ms"}


def test_a_minimal_trace_validates():
    flow = [
        {"ph": "s", "name": "m", "cat": "msg", "id": 1, "ts": 1, "pid": 1, "tid": 1},
        {"ph": "t", "name": "m", "cat": "msg", "id": 1, "ts": 2, "pid": 1, "tid": 1},
        {"ph": "f", "name": "m", "cat": "msg", "id": 1, "ts": 3, "pid": 1, "tid": 2, "bp": "e"},
    ]
    inst = {"ph": "i", "s": "g", "name": "now", "ts": 4, "pid": 1, "tid": 1}
    be = [{"ph": "B", "name": "b", "ts": 1, "pid": 1, "tid": 1}, {"ph": "E", "ts": 2, "pid": 1, "tid": 1}]
    assert validate_trace(_doc(_OK_X, inst, *flow, *be)) == []


@pytest.mark.parametrize(
    "doc, expect",
    [
        ([_OK_X], "JSON object"),
        ({"events": []}, "no traceEvents"),
        ({"traceEvents": {"a": 1}}, "must be a list"),
        (_doc(dict(_OK_X, dur=-1)), "negative dur"),
        (_doc({k: v for k, v in _OK_X.items() if k != "dur"}), "needs dur"),
        (_doc(dict(_OK_X, ph="Q")), "unknown ph"),
        (_doc({k: v for k, v in _OK_X.items() if k != "ph"}), "no ph"),
        (_doc(dict(_OK_X, ts=-3)), "negative ts"),
        (_doc(dict(_OK_X, ts="12")), "finite number"),
        (_doc({k: v for k, v in _OK_X.items() if k != "pid"}), "no pid"),
        (_doc({k: v for k, v in _OK_X.items() if k != "name"}), "no name"),
        (_doc(dict(_OK_X, tid="mailbox")), "tid must be"),
        (_doc({"ph": "i", "s": "x", "name": "n", "ts": 1, "pid": 1, "tid": 1}), "scope"),
        (_doc({"ph": "M", "name": "process_nam", "pid": 1, "args": {"name": "x"}}), "metadata name"),
        (_doc({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {}}), "args.name"),
        (_doc({"ph": "s", "name": "m", "cat": "msg", "id": 9, "ts": 1, "pid": 1, "tid": 1}), "never finishes"),
        (_doc({"ph": "f", "name": "m", "cat": "msg", "id": 9, "ts": 1, "pid": 1, "tid": 1}), "no start"),
        (_doc({"ph": "s", "name": "m", "cat": "msg", "ts": 1, "pid": 1, "tid": 1}), "needs an id"),
        (
            _doc(
                {"ph": "s", "name": "m", "cat": "msg", "id": 2, "ts": 5, "pid": 1, "tid": 1},
                {"ph": "f", "name": "m", "cat": "msg", "id": 2, "ts": 1, "pid": 1, "tid": 1},
            ),
            "no start",
        ),
        (_doc({"ph": "E", "ts": 2, "pid": 1, "tid": 1}), "no open B"),
        (_doc(dict(_OK_X, args=[1])), "args must be an object"),
        (dict(_doc(_OK_X), displayTimeUnit="s"), "displayTimeUnit"),
        (_doc("not an event"), "not an object"),
    ],
)
def test_validate_trace_rejects_malformed_documents(doc, expect):
    problems = validate_trace(doc)
    assert problems, doc
    assert any(expect in p for p in problems), problems


def test_commitlab_timeline_draws_a_trace_file_and_fails_on_a_malformed_one(p1_run, tmp_path):
    from runtime.cli import main

    good = tmp_path / "trace.json"
    good.write_text(json.dumps(p1_run[1]))
    out = tmp_path / "timeline.png"
    assert main(["timeline", str(good), str(out)]) == 0
    assert out.stat().st_size > 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "no pid, ts or dur"}]}))
    assert main(["timeline", str(bad), str(tmp_path / "bad.png")]) == 1
    assert main(["timeline", str(tmp_path / "missing.json"), str(tmp_path / "m.png")]) == 2
