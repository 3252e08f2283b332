"""The timeline picture's drawing (matplotlib): the frame sized for the lanes and the checkpoint
labels, the lanes' bars, commits, markers, checkpoint lines, failovers, the deadlock, the header
and the legend."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.core import roles
from runtime.lab.timeline_plot.classify import CheckpointMark, Classified, FailoverMark
from runtime.lab.timeline_plot.events import TraceEvent

COLORS = {
    "step": "#c4c4c4",  # a default-action step on the mailbox thread
    "mail": "#6b6b6b",  # a mail (operator event, checkpoint notification, resume)
    "snapshot": "#3d3d3d",  # snapshotState (the barrier)
    "flush": "#1f6fd1",  # a flush on the io thread
    "blocked": "#e00000",  # a blocked wait: pure-ish red, nothing else uses it
    "other": "#9a9a9a",
    "commit": "#1e9e3a",
    "instant": "#7a7a7a",
    "trigger": "#555555",
    "complete": "#1e7a34",
    "abort": "#d97a00",
    "fault": "#d97a00",
    "alarm": "#b00000",  # text about the deadlock: dark red, so pure red stays the bars' alone
    "failover": "#7b2cbf",  # a failover: the job failed here, and was down until the shade ends
}
_LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.6}

# writer lanes: the mailbox row on top, the io row below; blocked waits over the mailbox row
_ROWS_OF = {
    "step": (-0.36, 0.36),
    "mail": (-0.36, 0.36),
    "snapshot": (-0.36, 0.36),
    "flush": (0.06, 0.30),
    "blocked": (-0.42, 0.46),
    "other": (-0.25, 0.5),
}


@dataclass
class Frame:
    """The figure and where things go in it."""

    fig: Any
    ax: Any
    x0: float
    x1: float
    min_w: float  # the narrowest bar drawn (seconds): a zero-length bar stays visible
    y_of: dict[str, int]
    writers: list[str]
    left: float
    right: float
    height_in: float
    axes_in: float
    label_fs: float


def _place_labels(marks: list[CheckpointMark], x0: float, x1: float, width_in: float, fontsize: float) -> int:
    """Assigns each mark's label a row above the axes so no two labels overlap; returns rows."""
    char_frac = (fontsize * 0.62 / 72.0) / max(1e-9, width_in)  # a character's width, axes fraction
    row_ends: list[float] = []
    for m in sorted(marks, key=lambda m: m.t):
        xf = (m.t - x0) / max(1e-12, x1 - x0)
        width = char_frac * (len(m.label) + 1)
        m.ha = "left" if xf + width <= 1.03 else "right"  # near the right edge: to the left
        left, right = (xf - char_frac, xf + width) if m.ha == "left" else (xf - width, xf + char_frac)
        for r, end in enumerate(row_ends):
            if left > end:
                row_ends[r] = right
                m.row = r
                break
        else:
            row_ends.append(right)
            m.row = len(row_ends) - 1
    return len(row_ends)


def _label_deadlock(fig: Any, ax: Any, span: tuple[float, float], y: float, head: str, detail: str) -> None:
    """Writes the deadlock label inside its bar, in the largest font that fits: one line, else
    the head wrapped on two; the detail line goes when there is no room. A bar too short for any
    of it gets the label beside it, on a white box."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (xa, ya), (xb, yb) = ax.transData.transform([(span[0], y - 0.46), (span[1], y + 0.46)])
    room_w, room_h = abs(xb - xa) - 12, abs(yb - ya) - 6
    wrapped = head.replace(" in its own", "\nin its own", 1)
    for text, size, with_detail in [
        (head, 10, True),
        (head, 9, True),
        (wrapped, 10, True),
        (wrapped, 9, True),
        (head, 8, False),
        (wrapped, 8, False),
    ]:
        t = ax.text(
            span[0],
            y,
            "",
            fontsize=size,
            fontweight="bold",
            color="white",
            va="center",
            ha="left",
            zorder=8,
            linespacing=1.05,
        )
        t.set_text(text)
        box = t.get_window_extent(renderer)
        sub_h = 11.0 if with_detail else 0.0
        if box.width <= room_w and box.height + sub_h <= room_h:
            break
        t.remove()
    else:  # no room inside: beside the bar, readable over whatever is there
        ax.text(
            span[0],
            y,
            head + "  ",
            fontsize=9,
            fontweight="bold",
            color=COLORS["alarm"],
            va="center",
            ha="right",
            zorder=9,
            bbox={"facecolor": "white", "edgecolor": COLORS["alarm"], "pad": 2.0},
        )
        return
    _centre_deadlock_label(fig, ax, t, box, (span[0], y), detail if with_detail else None, room_w)


def _centre_deadlock_label(
    fig: Any, ax: Any, t: Any, box: Any, at: tuple[float, float], detail: str | None, room_w: float
) -> None:
    """Centres the block vertically in the bar: the head above, the detail line (shortened to fit) below."""
    renderer = fig.canvas.get_renderer()
    span0, y = at
    pad = 6 * 72.0 / fig.dpi  # points
    if detail is None:
        t.set_position((span0, y))
        t.set_transform(ax.transData + _offset(fig, pad, 0))
        return
    head_pt = box.height * 72.0 / fig.dpi
    t.set_transform(ax.transData + _offset(fig, pad, 5.5))  # the block (head, gap, detail) centred
    sub = ax.text(
        span0,
        y,
        detail,
        fontsize=7.5,
        color="white",
        va="center",
        ha="left",
        zorder=8,
        transform=ax.transData + _offset(fig, pad, 5.5 - head_pt / 2 - 6.5),
    )
    while sub.get_window_extent(renderer).width > room_w and len(sub.get_text()) > 20:
        sub.set_text(sub.get_text()[:-6].rstrip(" .…") + "…")


def _offset(fig: Any, dx_pt: float, dy_pt: float) -> Any:
    from matplotlib.transforms import ScaledTranslation

    return ScaledTranslation(dx_pt / 72.0, dy_pt / 72.0, fig.dpi_scale_trans)


def open_frame(
    lanes: list[str],
    writers: list[str],
    marks: list[CheckpointMark],
    x_range: tuple[float, float],
    title: str,
    dpi: int,
) -> Frame:
    """The figure, sized for the lanes and the rows of checkpoint labels above them (inches)."""
    import matplotlib.pyplot as plt

    x0, x1 = x_range
    width_in = 14.0
    label_fs = 8.0
    rows = _place_labels(marks, x0, x1, width_in * 0.86, label_fs) if marks else 0
    lane_in = 0.62
    top_in = 0.75 + (0.22 if title else 0.0) + 0.2 * rows
    bottom_in = 1.15
    height_in = top_in + bottom_in + lane_in * len(lanes)
    fig = plt.figure(figsize=(width_in, height_in), dpi=dpi)
    left, right = 0.09, 0.955
    ax = fig.add_axes((left, bottom_in / height_in, right - left, lane_in * len(lanes) / height_in))
    ax.set_xlim(x0, x1)
    ax.set_ylim(len(lanes) - 0.5, -0.5)  # the first lane on top
    return Frame(
        fig=fig,
        ax=ax,
        x0=x0,
        x1=x1,
        min_w=(x1 - x0) / (width_in * (right - left) * dpi) * 1.2,
        y_of={name: i for i, name in enumerate(lanes)},
        writers=writers,
        left=left,
        right=right,
        height_in=height_in,
        axes_in=lane_in * len(lanes),
        label_fs=label_fs,
    )


def draw_lanes(fr: Frame, bars: dict[tuple[str, str], list[tuple[float, float]]]) -> None:
    """Striped lanes, then the bars of each kind, then which half of a writer lane is which thread."""
    from matplotlib.transforms import blended_transform_factory

    ax = fr.ax
    for i in range(len(fr.y_of)):
        if i % 2 == 0:
            ax.axhspan(i - 0.5, i + 0.5, color="#f4f6f9", zorder=0, lw=0)
        if i:
            ax.axhline(i - 0.5, color="#d5d9de", lw=0.8, zorder=1)
    for kind in ("step", "mail", "snapshot", "other", "flush", "blocked"):
        for (proc, k), spans in bars.items():
            if k != kind:
                continue
            y = fr.y_of[proc]
            off, h = _ROWS_OF[kind]
            if proc not in fr.writers and kind == "flush":
                off, h = -0.25, 0.5
            xr = [(t, max(d, fr.min_w)) for t, d in spans]
            ax.broken_barh(
                xr,
                (y + off, h),
                facecolors=COLORS[kind],
                edgecolors="none",
                zorder={"blocked": 4, "flush": 3}.get(kind, 2),
            )
    hint_tf = blended_transform_factory(ax.transAxes, ax.transData)
    for w in fr.writers:  # a hint of which half is which thread
        for dy, text in ((-0.18, "mailbox"), (0.18, "io")):
            ax.text(
                1.002,
                fr.y_of[w] + dy,
                text,
                transform=hint_tf,
                fontsize=6.5,
                color="#777777",
                va="center",
                ha="left",
                clip_on=False,
            )


def draw_commits(fr: Frame, commits: list[TraceEvent]) -> None:
    """Commits: green diamonds on the coordinator lane, each labelled with its checkpoint."""
    if not commits:
        return
    ax, yc = fr.ax, fr.y_of[roles.COORDINATOR]
    ax.scatter(
        [c.t for c in commits],
        [yc - 0.08] * len(commits),
        marker="D",
        s=70,
        color=COLORS["commit"],
        edgecolors="#0d5a1f",
        linewidths=0.8,
        zorder=6,
    )
    for c in commits:
        ckp = c.args.get("checkpoint")
        flip = (c.t - fr.x0) / (fr.x1 - fr.x0) > 0.88
        ax.annotate(
            f"commit{'' if ckp is None else f' (ckp {ckp})'}",
            (c.t, yc - 0.08),
            xytext=(-9 if flip else 9, 4),
            textcoords="offset points",
            fontsize=7.5,
            color="#0d5a1f",
            va="bottom",
            ha="right" if flip else "left",
            zorder=6,
            bbox=_LABEL_BOX,
        )


def draw_points(fr: Frame, points: list[tuple[str, TraceEvent]]) -> None:
    """Faults as crosses, new instants as small triangles, other instants as ticks."""
    ax, yc = fr.ax, fr.y_of[roles.COORDINATOR]
    for kind, e in points:
        y = fr.y_of.get(e.process, yc)
        if kind == "fault":
            ax.scatter([e.t], [y], marker="X", s=60, color=COLORS["fault"], zorder=6)
            ax.annotate(
                e.name,
                (e.t, y),
                xytext=(5, -10),
                textcoords="offset points",
                fontsize=7,
                color=COLORS["fault"],
                zorder=6,
            )
        elif kind == "new_instant":
            ax.scatter([e.t], [y + 0.28], marker="^", s=22, color=COLORS["instant"], zorder=5)
        else:
            ax.scatter([e.t], [y + 0.28], marker="|", s=60, color=COLORS["instant"], zorder=5)
            if e.process == roles.COORDINATOR:
                text = e.name.split(",")[0][:40]
                flip = (e.t - fr.x0) / (fr.x1 - fr.x0) > 0.85
                ax.annotate(
                    text,
                    (e.t, y + 0.28),
                    xytext=(-4 if flip else 4, -2),
                    textcoords="offset points",
                    fontsize=7,
                    color="#555555",
                    va="center",
                    ha="right" if flip else "left",
                    zorder=5,
                    bbox=_LABEL_BOX,
                )


def draw_checkpoints(fr: Frame, marks: list[CheckpointMark], traced_triggers: set[int]) -> None:
    """Checkpoints: dashed lines over every lane, labels in rows above the axes; the job manager's
    lane marks where it recorded each one."""
    from matplotlib.transforms import blended_transform_factory

    ax = fr.ax
    label_tf = blended_transform_factory(ax.transData, ax.transAxes)
    yj = fr.y_of[roles.JOB_MANAGER]
    for m in marks:
        color = COLORS[m.kind]
        if m.kind != "trigger" or m.checkpoint in traced_triggers:
            ax.scatter([m.t], [yj], marker="o" if m.kind == "complete" else "s", s=28, color=color, zorder=6)
        ax.axvline(m.t, color=color, ls=(0, (4, 3)), lw=1.1, zorder=3.5, alpha=0.9)
        ax.text(
            m.t,
            1.0 + (0.04 + 0.2 * m.row) / fr.axes_in,
            m.label,
            transform=label_tf,
            fontsize=fr.label_fs,
            color=color,
            ha=m.ha,
            va="bottom",
            clip_on=False,
            fontweight="bold" if m.kind != "trigger" else "normal",
        )


def draw_failovers(fr: Frame, failovers: list[FailoverMark]) -> None:
    """A failover: a line over every lane where the job failed, its name under the axis, and the
    time until every restarted role was up shaded (the attempts before and after it both show)."""
    from matplotlib.transforms import blended_transform_factory

    ax = fr.ax
    tf = blended_transform_factory(ax.transData, ax.transAxes)
    for f in failovers:
        if f.back_at is not None:
            ax.axvspan(f.at, max(f.back_at, f.at + fr.min_w), color=COLORS["failover"], alpha=0.12, zorder=1)
    for f in failovers:
        ax.axvline(f.at, color=COLORS["failover"], lw=1.6, zorder=6)
        ax.text(
            f.at,
            0.01,
            " " + f.label,
            transform=tf,
            fontsize=fr.label_fs,
            color=COLORS["failover"],
            ha="left",
            va="bottom",
            fontweight="bold",
            zorder=7,
            bbox=_LABEL_BOX,
        )


def draw_deadlock(fr: Frame, deadlock: Mapping[str, Any], dl_task: str, dl_span: tuple[float, float]) -> str:
    """The deadlock: the wait that never ended, over the whole lane, to the end of the run; returns its label."""
    y = fr.y_of[dl_task]
    s0, s1 = dl_span
    fr.ax.broken_barh(
        [(s0, max(s1 - s0, fr.min_w))],
        (y - 0.46, 0.92),
        facecolors=COLORS["blocked"],
        edgecolors="#7a0000",
        linewidth=1.2,
        zorder=7,
    )
    releasing = deadlock.get("releasing_mail") or "a mail"
    label = f"DEADLOCK: waits for {releasing} in its own mailbox"
    detail = f"{dl_task}'s mailbox thread blocked {float(deadlock.get('blocked_s') or 0):.1f} s"
    if deadlock.get("running_mail"):
        detail += f" in {deadlock['running_mail']}"
    _label_deadlock(fr.fig, fr.ax, (s0, s1), y, label, detail)
    return label


def style_axes(fr: Frame, lanes: list[str], dl_task: str | None) -> None:
    ax = fr.ax
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes, fontsize=9)
    for lbl in ax.get_yticklabels():
        if lbl.get_text() == dl_task:
            lbl.set_color(COLORS["alarm"])
            lbl.set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("seconds from the start of the run", fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#e3e6ea", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def draw_header(
    fr: Frame,
    srt: Classified,
    statuses: dict[int, dict[str, Any]],
    checkpoints: Mapping[str, Any] | None,
    title: str,
    deadlock_in: str | None,
) -> None:
    """The title and one line of facts: write tasks, commits, checkpoints, blocked waits, a deadlock."""
    counts = srt.counts
    n_ckp = statuses or {k: {"status": "completed"} for k in srt.completes}
    done = sum(1 for v in n_ckp.values() if v.get("status") == "completed")
    aborted = sum(1 for v in n_ckp.values() if v.get("status") in ("aborted", "timed-out"))
    facts = [
        f"{len(fr.writers)} write task{'s' if len(fr.writers) != 1 else ''}",
        f"{counts['commit']} commit{'s' if counts['commit'] != 1 else ''}",
        f"checkpoints: {done} completed" + (f", {aborted} aborted" if aborted else ""),
    ]
    requested = checkpoints.get("requested") if isinstance(checkpoints, Mapping) else None
    if isinstance(requested, int):
        facts[-1] += f" of {requested} requested"
    if counts["blocked"]:
        facts.append(f"{counts['blocked']} blocked wait{'s' if counts['blocked'] != 1 else ''}")
    if deadlock_in:
        facts.append(f"DEADLOCK in {deadlock_in}")
    title_y = 1.0 - 0.12 / fr.height_in
    if title:
        fr.fig.text(fr.left, title_y, title, fontsize=12.5, fontweight="bold", va="top", ha="left")
        title_y -= 0.26 / fr.height_in
    fr.fig.text(
        fr.left,
        title_y,
        "  ·  ".join(facts),
        fontsize=9,
        color=COLORS["alarm"] if deadlock_in else "#333333",
        va="top",
        ha="left",
    )


def draw_legend(fr: Frame, srt: Classified, with_deadlock: bool) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color=COLORS["step"], label="default-action step (mailbox)"),
        Patch(color=COLORS["mail"], label="mail / snapshotState (mailbox)"),
        Patch(color=COLORS["flush"], label="flush (io thread)"),
        Patch(color=COLORS["blocked"], label="blocked wait" + (" / deadlock" if with_deadlock else "")),
        Line2D([], [], marker="D", ls="", color=COLORS["commit"], label="commit"),
        Line2D([], [], marker="^", ls="", color=COLORS["instant"], label="new instant"),
        Line2D([], [], color=COLORS["trigger"], ls="--", label="ckp k: first barrier"),
        Line2D([], [], color=COLORS["complete"], ls="--", label="ckp k done"),
    ]
    if srt.aborts:
        handles.append(Line2D([], [], color=COLORS["abort"], ls="--", label="ckp k aborted"))
    if srt.counts["fault"]:
        handles.append(Line2D([], [], marker="X", ls="", color=COLORS["fault"], label="fault"))
    if srt.failovers:
        handles.append(Patch(facecolor=COLORS["failover"], alpha=0.35, label="failover: down until restarted"))
    fr.fig.legend(
        handles=handles,
        loc="lower center",
        ncol=min(len(handles), 5),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5 * (fr.left + fr.right), 0.0),
        handlelength=1.8,
        columnspacing=1.6,
    )


def pixel_layout(fr: Frame) -> tuple[dict[str, tuple[int, int]], tuple[int, int], tuple[int, int]]:
    """Where things are in the PNG (rows from the top), for whoever checks the picture: each lane's
    rows, the x axis' two end columns, the size."""
    fr.fig.canvas.draw()
    w_px, h_px = fr.fig.canvas.get_width_height()
    lane_pixels = {}
    for name, i in fr.y_of.items():
        (_, ya), (_, yb) = fr.ax.transData.transform([(fr.x0, i - 0.5), (fr.x0, i + 0.5)])
        top, bottom = sorted((h_px - ya, h_px - yb))
        lane_pixels[name] = (int(math.ceil(top)), int(math.floor(bottom)))
    (xa, _), (xb, _) = fr.ax.transData.transform([(fr.x0, 0), (fr.x1, 0)])
    return lane_pixels, (int(round(xa)), int(round(xb))), (w_px, h_px)
