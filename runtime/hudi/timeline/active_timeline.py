"""Hudi's active timeline as one listing reads it (``HoodieActiveTimeline``,
``HoodieDefaultTimeline``): the latest state of each instant, the commits timeline, pending and
completed instants and compactions, and layout 2's completion times."""

from __future__ import annotations

import operator
from collections.abc import Iterable

from runtime.hudi.timeline.instant import (
    COMMIT,
    COMPACTION,
    COMPLETED,
    DELTA_COMMIT,
    INFLIGHT,
    REQUESTED,
    WRITE_ACTIONS,
    Instant,
)

# (built once: a simulated run reads about 200 timelines of about 50 instants)
_STATE_ORDER = {REQUESTED: 0, INFLIGHT: 1, COMPLETED: 2}
_TIME_AND_ACTION = operator.attrgetter("ts", "action")  # the instants' order: (time, action)


class Timeline:
    """The instants of ``.hoodie`` as read by one listing (Hudi's active timeline).

    One instant per (time, comparable action): ``<C>.compaction.requested``, ``.inflight`` and the
    completed ``<C>.commit`` are states of one compaction (``HoodieInstant.getComparableAction``),
    whose requested file stays on the timeline with the plan after it completes."""

    def __init__(self, instants: Iterable[Instant]) -> None:
        latest: dict[tuple[str, str], Instant] = {}
        order = _STATE_ORDER
        self.compactions: set[str] = set()  # times of every compaction, pending or completed
        self.completions: dict[str, str] = {}  # requested time -> completion time (layout 2)
        for inst in instants:
            ts, action = inst.ts, inst.action
            if inst.completion is not None:
                self.completions[ts] = inst.completion
            if action == COMPACTION:
                self.compactions.add(ts)
                action = COMMIT
            held = latest.get((ts, action))
            if held is None or order[inst.state] > order[held.state]:
                latest[ts, action] = inst
        self.instants = sorted(latest.values(), key=_TIME_AND_ACTION)
        data = [i for i in self.instants if i.action in WRITE_ACTIONS or i.ts in self.compactions]
        self._committed = {i.ts for i in data if i.state == COMPLETED and i.action in WRITE_ACTIONS}
        self._first_data = data[0].ts if data else None

    def commits(self) -> list[Instant]:
        """The commits timeline: commits and delta commits, completed compactions among them."""
        return [i for i in self.instants if i.action in WRITE_ACTIONS]

    def completed_instants(self) -> list[str]:
        """Every completed instant of the commits timeline: writers' commits and compactions
        (what makes a file slice committed)."""
        return [i.ts for i in self.commits() if i.state == COMPLETED]

    def completed_commits(self) -> list[str]:
        """The writers' completed commits (delta commits on merge-on-read), compactions left out."""
        return [i.ts for i in self.commits() if i.state == COMPLETED and i.ts not in self.compactions]

    def completed_compactions(self) -> list[str]:
        return [i.ts for i in self.commits() if i.state == COMPLETED and i.ts in self.compactions]

    def pending_commits(self) -> list[str]:
        return [i.ts for i in self.commits() if i.state != COMPLETED]

    def pending_compactions(self, state: str | None = None) -> list[str]:
        """Compactions not completed (``filterPendingCompactionTimeline``), of one state if given."""
        return [i.ts for i in self.instants if i.action == COMPACTION and (state is None or i.state == state)]

    def delta_commits_since_compaction(self, *, completed_only: bool = False) -> int:
        """``CompactionUtils.getDeltaCommitsSinceLatestCompaction``: the delta commits, in any
        state, after the latest completed compaction (all of them when none completed);
        ``completed_only``: the completed ones (Hudi 1.x ``getCompletedDeltaCommitsSinceLatestCompaction``)."""
        done = self.completed_compactions()
        after = done[-1] if done else ""
        return sum(
            1
            for i in self.instants
            if i.action == DELTA_COMMIT and i.ts > after and (not completed_only or i.state == COMPLETED)
        )

    def contains_or_before_start(self, ts: str) -> bool:
        """``HoodieDefaultTimeline.containsOrBeforeTimelineStarts``: whether a file of instant
        ``ts`` is committed: a completed instant of the commits timeline, or one before the first
        data instant in any state (the archiver moved it off the timeline; it never archives past
        a pending instant)."""
        return ts in self._committed or (self._first_data is not None and ts < self._first_data)

    def last_pending(self) -> str | None:
        pending = self.pending_commits()
        return pending[-1] if pending else None

    def last_completed(self) -> str | None:
        done = self.completed_commits()
        return done[-1] if done else None

    def is_completed(self, ts: str) -> bool:
        return any(i.ts == ts and i.state == COMPLETED for i in self.commits())

    def latest_ts(self) -> str | None:
        """The latest time on the timeline, completion times included."""
        times = [*(i.ts for i in self.instants[-1:]), *self.completions.values()]
        return max(times) if times else None

    def completion_of(self, ts: str) -> str | None:
        """A completed instant's completion time (None before layout 2, or not completed)."""
        return self.completions.get(ts)
