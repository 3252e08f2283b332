"""The deadlock watchdog: finds a task whose mailbox thread waits for a mail in its own mailbox.

Flink runs every mail on the task's one mailbox thread, so a mail can only run when the thread is
free. A task blocked inside a mail or a default-action step, waiting for something that only a
mail of its own mailbox would deliver (P1's ``CommitAckEvent``), waits for itself: a wait-for
cycle. The watchdog reads each task's introspection dump (answered even while the mailbox is
blocked) and reports that cycle with everything needed to understand it. A long wait without a
releasing mail in the mailbox is reported as a stall, not a deadlock.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.messages import MailInfo, TaskDump
from runtime.lab.verdicts import Deadlock, QueuedMail


@dataclass
class Stall:
    """A task blocked past the threshold on something outside its mailbox (a DFS file, the
    coordinator), which may still come: reported, not called a deadlock."""

    task: str
    what: str
    waiting_on: str
    blocked_s: float


# a one-line summary of many waits names this many, the longest, and counts the rest
SHOWN_LONGEST = 3


def longest_waits(blocked_s: dict[str, float], shown: int = SHOWN_LONGEST) -> list[tuple[str, float]]:
    """The ``shown`` longest waits, longest first (ties by name)."""
    return sorted(blocked_s.items(), key=lambda kv: (-kv[1], kv[0]))[:shown]


def stalls_text(stalls: list[Stall]) -> str:
    """One line: each stall when there are few; else how many, and the longest."""
    if not stalls:
        return "none"
    if len(stalls) > SHOWN_LONGEST:
        shown = sorted(stalls, key=lambda st: (-st.blocked_s, st.task))[:SHOWN_LONGEST]
        return f"{len(stalls)} tasks, the longest: " + "; ".join(map(_stall_text, shown))
    return "; ".join(map(_stall_text, stalls))


def _stall_text(st: Stall) -> str:
    return f"{st.task} {st.what} for {st.blocked_s:.1f}s ({st.waiting_on})"


def _running(dump: TaskDump) -> str:
    cur = dump.running
    if cur is None:
        return "nothing (idle)"
    return cur.description or cur.kind or cur.what


def _releasing_mail(dump: TaskDump) -> MailInfo | None:
    """The queued mail that would end the task's wait, if the wait names one and it is queued."""
    kind = dump.blocked.releasing_mail if dump.blocked is not None else None
    return next((m for m in dump.mailbox if m.kind == kind), None) if kind else None


def find_deadlock(dumps: dict[str, TaskDump], threshold_s: float) -> Deadlock | None:
    """The first task (by name) blocked at least ``threshold_s`` on a wait whose releasing mail
    sits in its own mailbox."""
    for name in sorted(dumps):
        dump = dumps[name]
        match = _releasing_mail(dump)
        if dump.blocked is None or match is None or dump.blocked_s < threshold_s:
            continue
        report = Deadlock(
            task=name,
            running_mail=_running(dump),
            waiting_for=f"{dump.blocked.what}: {dump.blocked.waiting_on}",
            releasing_mail=match.description or match.kind,
            mailbox_position=match.position,
            blocked_s=dump.blocked_s,
            blocked_checkpoint=dump.blocked.checkpoint_id,
            explanation="",
            mailbox=[QueuedMail(m.position, m.kind, m.description, m.priority) for m in dump.mailbox],
        )
        report.explanation = explain(report, dump)
        return report
    return None


def find_stalls(dumps: dict[str, TaskDump], threshold_s: float) -> list[Stall]:
    """Tasks blocked longer than the threshold with no releasing mail of their own."""
    return [
        Stall(name, d.blocked.what, d.blocked.waiting_on, d.blocked_s)
        for name, d in sorted(dumps.items())
        if d.blocked is not None and d.blocked_s >= threshold_s and _releasing_mail(d) is None
    ]


def explain(r: Deadlock, dump: TaskDump) -> str:
    queue = ", ".join(f"[{m.position}] {m.description or m.kind}" for m in r.mailbox) or "(empty)"
    lines = [
        f"DEADLOCK in {r.task}: its mailbox thread has been blocked for {r.blocked_s:.1f}s.",
        f"  running:      {r.running_mail}",
        f"  waiting for:  {r.waiting_for}",
        f"  released by:  {r.releasing_mail}, which sits at position {r.mailbox_position} of {r.task}'s own mailbox",
        f"  mailbox:      {queue}",
        "  why it never ends: a mail runs only on the mailbox thread, and that thread is the one "
        "waiting. Operator events are lowest-priority mails, so not even a yield inside the "
        "blocked step could run it (the wait-for cycle is "
        f"{r.task} -> {r.releasing_mail} -> {r.task}).",
    ]
    if dump.input_queue:
        lines.append(
            f"  behind it:    {dump.input_queue} input item(s) wait in the input queue "
            "(the next barrier among them), so the next checkpoint cannot complete either."
        )
    lines.append(
        "  Hudi ends this only when write.commit.ack.timeout fires and the job fails over; "
        "the message bus (P2) and coordination RPC (P4) remove the cycle."
    )
    return "\n".join(lines)
