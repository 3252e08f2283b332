"""The timeline picture of a run: :func:`render_timeline` classifies the trace events and draws
them; :func:`plot_trace_file` draws a trace file; ``commitlab timeline`` draws a trace file from the command line."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.lab.timeline_plot.classify import (
    CheckpointMark,
    checkpoint_marks,
    checkpoint_statuses,
    classify,
    lanes_of,
    time_range,
    writer_lanes,
)
from runtime.lab.timeline_plot.draw import (
    draw_checkpoints,
    draw_commits,
    draw_deadlock,
    draw_failovers,
    draw_header,
    draw_lanes,
    draw_legend,
    draw_points,
    open_frame,
    pixel_layout,
    style_axes,
)
from runtime.lab.timeline_plot.events import normalize_events


@dataclass
class TimelinePlot:
    """What :func:`render_timeline` drew: the file, the lanes top to bottom, how many shapes of
    each kind, the deadlock label (None: no deadlock), and where each lane and the time axis are
    in the PNG (pixel rows ``(top, bottom)`` and columns ``(left, right)``)."""

    path: str
    lanes: list[str]
    counts: dict[str, int]
    duration_s: float
    deadlock_label: str | None = None
    checkpoint_marks: list[CheckpointMark] = field(default_factory=list)
    lane_pixels: dict[str, tuple[int, int]] = field(default_factory=dict)
    x_pixels: tuple[int, int] = (0, 0)
    x_range_s: tuple[float, float] = (0.0, 1.0)  # the seconds at x_pixels' two ends
    size_px: tuple[int, int] = (0, 0)  # (width, height)

    def time_of(self, column: int) -> float:
        """The time (seconds from the start) at a PNG column."""
        (c0, c1), (s0, s1) = self.x_pixels, self.x_range_s
        return s0 + (column - c0) / (c1 - c0) * (s1 - s0)


def render_timeline(
    events: Iterable[Mapping[str, Any]] | Mapping[str, Any],
    out_png: str,
    *,
    title: str = "",
    deadlock: Mapping[str, Any] | None = None,
    checkpoints: Mapping[str, Any] | None = None,
    dpi: int = 110,
) -> TimelinePlot:
    """Draws the timeline of a run into ``out_png``; returns what it drew (see :func:`plot_timeline`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evs = normalize_events(events)
    deadlock = dict(deadlock) if deadlock else None
    dl_task = str(deadlock.get("task")) if deadlock and deadlock.get("task") else None
    lanes = lanes_of(evs, dl_task)
    writers = writer_lanes(lanes, evs)
    t_start, t_end, dl_span = time_range(evs, deadlock, dl_task)
    span = max(t_end - t_start, 1e-3)
    srt = classify(evs)
    statuses = checkpoint_statuses(checkpoints)
    marks = checkpoint_marks(srt, statuses)

    fr = open_frame(lanes, writers, marks, (t_start, t_end + 0.02 * span), title, dpi)
    draw_lanes(fr, srt.bars)
    draw_commits(fr, srt.commits)
    draw_points(fr, srt.points)
    draw_checkpoints(fr, marks, srt.traced_triggers)
    draw_failovers(fr, srt.failovers)
    deadlock_label = None
    if deadlock and dl_task and dl_span is not None:
        deadlock_label = draw_deadlock(fr, deadlock, dl_task, dl_span)
        srt.counts["blocked"] += 1
    style_axes(fr, lanes, dl_task)
    draw_header(fr, srt, statuses, checkpoints, title, dl_task if deadlock_label else None)
    draw_legend(fr, srt, deadlock_label is not None)
    if not evs and not dl_task:
        fr.ax.text(0.5, 0.5, "no trace events", transform=fr.ax.transAxes, ha="center", va="center", color="#888888")

    lane_pixels, x_pixels, size_px = pixel_layout(fr)
    os.makedirs(os.path.dirname(os.path.abspath(out_png)), exist_ok=True)
    fr.fig.savefig(out_png, dpi=dpi)
    plt.close(fr.fig)
    return TimelinePlot(
        path=out_png,
        lanes=lanes,
        counts=srt.counts,
        duration_s=round(t_end - t_start, 6),
        deadlock_label=deadlock_label,
        checkpoint_marks=marks,
        lane_pixels=lane_pixels,
        x_pixels=x_pixels,
        x_range_s=(fr.x0, fr.x1),
        size_px=size_px,
    )


def plot_timeline(
    events: Iterable[Mapping[str, Any]] | Mapping[str, Any],
    out_png: str,
    *,
    title: str = "",
    deadlock: Mapping[str, Any] | None = None,
    checkpoints: Mapping[str, Any] | None = None,
) -> str:
    """Draws a run's timeline as a PNG at ``out_png`` and returns the path.

    ``events``: the run's trace events, written (integer pid/tid plus ``M`` metadata, a whole
    ``{"traceEvents": ...}`` document too) or raw (pid = role, tid = thread).
    ``deadlock``: ``result["deadlock"]`` (task, blocked_s, releasing_mail, running_mail): the wait
    that never ended, drawn in red to the end. ``checkpoints``: ``result["checkpoints"]`` or its
    ``detail``, for the statuses. :func:`render_timeline` takes the same arguments and also
    returns what it drew (:class:`TimelinePlot`)."""
    return render_timeline(events, out_png, title=title, deadlock=deadlock, checkpoints=checkpoints).path


def plot_trace_file(
    trace_path: str, out_png: str, *, result: Mapping[str, Any] | str | None = None, title: str | None = None
) -> TimelinePlot:
    """Draws a trace file; ``result`` (a result record or the path of ``result.json``) supplies the
    deadlock, the checkpoints and a default title."""
    import json

    with open(trace_path) as f:
        doc = json.load(f)
    record: Mapping[str, Any]
    if isinstance(result, str):
        with open(result) as f:
            record = json.load(f) or {}
    else:
        record = result or {}
    if title is None:
        title = (
            f"{record.get('protocol', '')}: {record.get('status', '')}".strip(": ")
            if record
            else os.path.basename(trace_path)
        )
    return render_timeline(
        doc, out_png, title=title, deadlock=record.get("deadlock"), checkpoints=record.get("checkpoints")
    )
