"""A run's timeline as a picture, and a checker for Chrome trace-event files.

:func:`plot_timeline` draws the trace events of a run (what ``--trace FILE`` or
``simulate(..., chrome_trace_path=...)`` writes, or the raw per-role events before
:func:`runtime.core.trace.write_trace` numbers them) as one PNG: a lane per write task, then the
coordinator and the job manager, time in seconds from the start on the x axis.

* write tasks: every mail and default-action step on the mailbox thread is a thin grey bar in the
  upper half of the lane, every flush (the ``io`` thread) a blue bar in the lower half, every
  blocked wait (complete events with ``cat="blocked"``) a red bar over the mailbox row;
* a deadlock (the ``deadlock`` record of ``result.json``) is the wait that never ended, so it is in
  no trace: it is drawn as a red bar over the whole lane, from the start of the wait to the end of
  the run, labelled ``DEADLOCK: waits for <releasing mail> in its own mailbox``;
* checkpoints are vertical dashed lines: ``ckp k`` where the first write task takes barrier k
  (its ``snapshotState``; a ``checkpoint k triggered`` instant of the job manager wins when the
  trace has one), ``ckp k done`` where the job manager records the completion, ``ckp k aborted``
  where it records an abort;
* commits are green diamonds on the coordinator lane.

Events are told apart by their category and args (``runtime.core.trace_events``), not by their
names, which are for people and may change.

:func:`validate_trace` checks a trace document against the trace-event format
(https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU) and returns
the problems it found (empty: valid).

``commitlab timeline TRACE.json OUT.png [--result result.json]`` draws a trace file.

Modules: ``trace_format`` (the format's check), ``events`` (trace events in seconds, by name),
``classify`` (what each event becomes in the picture), ``draw`` (matplotlib), ``render`` (the
entry points).
"""

from runtime.lab.timeline_plot.events import TraceEvent, normalize_events
from runtime.lab.timeline_plot.render import TimelinePlot, plot_timeline, plot_trace_file, render_timeline
from runtime.lab.timeline_plot.trace_format import PHASES, validate_trace

__all__ = [
    "TraceEvent",
    "TimelinePlot",
    "normalize_events",
    "plot_timeline",
    "render_timeline",
    "plot_trace_file",
    "validate_trace",
    "PHASES",
]
