"""What a run leaves in its ``--out`` directory: ``result.json`` and the timeline picture.

The one writer of both, for a run on Ray (``actors/job.py``: the roles' trace events gathered at
the end) and a simulated one (``commitlab simulate``: the Chrome trace the simulator wrote as
``trace.json``). A picture never fails a run: an error drawing it is recorded as
``timeline_error``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from runtime.core.json_doc import JsonObject
from runtime.lab.results import JobResult

RESULT_FILE = "result.json"
TIMELINE_FILE = "timeline.png"
CHROME_TRACE_FILE = "trace.json"


def draw_timeline(out_dir: str, record: JobResult, events: Iterable[Mapping[str, Any]] | None = None) -> None:
    """``OUT/timeline.png`` from ``events`` (the Chrome trace events of the run), or from
    ``OUT/trace.json`` when none are given; sets ``record.timeline`` or ``record.timeline_error``."""
    from runtime.lab.timeline_plot import plot_timeline

    png = os.path.join(out_dir, TIMELINE_FILE)
    try:  # a picture must never fail a run
        if events is None:
            with open(os.path.join(out_dir, CHROME_TRACE_FILE)) as f:
                events = json.load(f)
        record.timeline = plot_timeline(
            events,
            png,
            title=f"{record.protocol}, {record.writers} writers: {record.status.value}",
            deadlock=record.deadlock.to_json() if record.deadlock else None,
            checkpoints=asdict(record.figures.checkpoints),
        )
    except Exception as exc:  # noqa: BLE001 - recorded: a picture must never fail a run
        record.timeline_error = f"{type(exc).__name__}: {exc}"


def write_result(out_dir: str, record: JobResult, extra: JsonObject | None = None) -> str:
    """``OUT/result.json``: the record's JSON form, with ``extra`` fields of the command that ran
    it (a simulation's determinism check). Returns the path."""
    return write_result_doc(out_dir, record.to_json() | (extra or {}))


def write_result_doc(out_dir: str, doc: JsonObject) -> str:
    """``OUT/result.json`` holding ``doc``. Returns the path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, RESULT_FILE)
    # written aside and renamed: a reader (or a run ended mid-write) sees a whole record or none
    part = f"{path}.part"
    with open(part, "w") as f:
        json.dump(doc, f, indent=2, default=str)
    os.replace(part, path)
    return path


def remove_result(out_dir: str) -> None:
    """Removes an earlier run's ``result.json`` from ``out_dir``, so the file there is this run's."""
    for name in (RESULT_FILE, f"{RESULT_FILE}.part"):
        path = os.path.join(out_dir, name)
        if os.path.exists(path):
            os.remove(path)
