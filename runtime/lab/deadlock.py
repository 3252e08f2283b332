"""The deadlock watchdog: finds a task whose mailbox thread waits for a mail in its own mailbox.

Flink runs every mail on the task's one mailbox thread, so a mail can only run when the thread is
free. A task blocked inside a mail or a default-action step, waiting for something that only a
mail of its own mailbox would deliver (P1's ``CommitAckEvent``), waits for itself: a wait-for
cycle. The watchdog reads each task's introspection dump (answered even while the mailbox is
blocked) and reports that cycle with everything needed to understand it. A long wait without a
releasing mail in the mailbox is reported as a stall, not a deadlock.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class DeadlockReport:
    task: str
    running_mail: str
    waiting_for: str
    releasing_mail: str
    mailbox_position: int
    blocked_s: float
    mailbox: list[dict[str, Any]]
    blocked_checkpoint: int = -1
    explanation: str = ""

    def to_result(self) -> dict[str, Any]:
        """The ``deadlock`` record of result.json."""
        return {k: v for k, v in asdict(self).items() if k != "mailbox"} | {
            "mailbox": [{k: m.get(k) for k in ("position", "kind", "description", "priority")} for m in self.mailbox]
        }


def _running(dump: dict[str, Any]) -> str:
    cur = dump.get("running") or {}
    if not cur:
        return "nothing (idle)"
    return str(cur.get("description") or cur.get("kind") or cur.get("what"))


def find_deadlock(dumps: dict[str, dict[str, Any]], threshold_s: float) -> DeadlockReport | None:
    """The first task (by name) blocked at least ``threshold_s`` on a wait whose releasing mail
    sits in its own mailbox."""
    for name in sorted(dumps):
        dump = dumps[name]
        blocked = dump.get("blocked")
        if not blocked or not blocked.get("releasing_mail"):
            continue
        if blocked.get("blocked_s", 0.0) < threshold_s:
            continue
        kind = blocked["releasing_mail"]
        mails = dump.get("mailbox") or []
        match = next((m for m in mails if m.get("kind") == kind), None)
        if match is None:
            continue
        report = DeadlockReport(
            task=name,
            running_mail=_running(dump),
            waiting_for=f"{blocked['what']}: {blocked['waiting_on']}",
            releasing_mail=str(match.get("description") or kind),
            mailbox_position=int(match.get("position", mails.index(match))),
            blocked_s=float(blocked["blocked_s"]),
            mailbox=mails,
            blocked_checkpoint=int(blocked.get("checkpoint_id", -1)),
        )
        report.explanation = explain(report, dump)
        return report
    return None


def find_stalls(dumps: dict[str, dict[str, Any]], threshold_s: float) -> list[dict[str, Any]]:
    """Tasks blocked longer than the threshold with no releasing mail of their own: they wait on
    something outside (a DFS file, the coordinator), which may still come."""
    out = []
    for name in sorted(dumps):
        blocked = dumps[name].get("blocked")
        releasing = blocked.get("releasing_mail") if blocked else None
        if releasing and any(m.get("kind") == releasing for m in dumps[name].get("mailbox") or []):
            continue  # that is a deadlock, not a stall
        if blocked and blocked.get("blocked_s", 0.0) >= threshold_s:
            out.append(
                {
                    "task": name,
                    "what": blocked["what"],
                    "waiting_on": blocked["waiting_on"],
                    "blocked_s": blocked["blocked_s"],
                }
            )
    return out


def explain(r: DeadlockReport, dump: dict[str, Any]) -> str:
    queue = ", ".join(f"[{m.get('position')}] {m.get('description') or m.get('kind')}" for m in r.mailbox) or "(empty)"
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
    if dump.get("input_queue"):
        lines.append(
            f"  behind it:    {dump['input_queue']} input item(s) wait in the input queue "
            "(the next barrier among them), so the next checkpoint cannot complete either."
        )
    lines.append(
        "  Hudi ends this only when write.commit.ack.timeout fires and the job fails over; "
        "the message bus (P2) and coordination RPC (P4) remove the cycle."
    )
    return "\n".join(lines)
