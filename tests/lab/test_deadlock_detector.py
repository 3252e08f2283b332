"""Tests of runtime.lab.deadlock on hand-built task dumps (the shape of WriteTask.dump()).

A deadlock is a task blocked, at least the threshold, on a wait whose releasing mail sits in its
own mailbox. A long wait for something outside is a stall; a short one is nothing.
"""

from __future__ import annotations

from runtime.core.messages import BlockedWait, MailInfo, MailRun, TaskDump
from runtime.lab.deadlock import Stall, explain, find_deadlock, find_stalls, stalls_text
from runtime.lab.verdicts import Deadlock


def mailbox(*kinds: str) -> list[MailInfo]:
    return [MailInfo(i, 10 + i, k, f"{k} #{10 + i}", 0, 1.0) for i, k in enumerate(kinds)]


DEFAULT_STEP = MailRun("default action", "defaultAction", "process batch of 500 rows", 99.0)


def dump(
    *,
    blocked_s: float | None = 3.0,
    releasing: str | None = "CommitAckEvent",
    mails: list[MailInfo] | None = None,
    running: MailRun | None = DEFAULT_STEP,
    input_queue: int = 0,
    ckp: int = 4,
    what: str = "instant initialize",
    waiting_on: str = "a new pending instant on the timeline or a CommitAckEvent",
) -> TaskDump:
    return TaskDump(
        role="writer-0",
        state="running",
        task_id=0,
        running=running,
        blocked=None if blocked_s is None else BlockedWait(what, waiting_on, 100.0, releasing, ckp),
        blocked_s=blocked_s or 0.0,
        mailbox=mails if mails is not None else mailbox("CheckpointNotice", "CommitAckEvent"),
        input_queue=input_queue,
        buffered_rows=500,
        current_instant="20240101000000000",
        last_checkpoint_id=ckp - 1,
        rows_in=500,
    )


def test_reports_the_blocked_task_with_its_releasing_mail_and_position():
    r = find_deadlock({"writer-0": dump(blocked_s=3.5)}, threshold_s=2.0)
    assert isinstance(r, Deadlock)
    assert r.task == "writer-0"
    assert r.running_mail == "process batch of 500 rows"
    assert r.waiting_for == ("instant initialize: a new pending instant on the timeline or a CommitAckEvent")
    assert r.releasing_mail == "CommitAckEvent #11"
    assert r.mailbox_position == 1
    assert r.blocked_s == 3.5
    assert r.blocked_checkpoint == 4
    assert [m.kind for m in r.mailbox] == ["CheckpointNotice", "CommitAckEvent"]


def test_only_the_deadlocked_task_is_reported():
    dumps = {"writer-0": dump(blocked_s=None), "writer-1": dump(blocked_s=5.0), "writer-2": dump(blocked_s=0.1)}
    r = find_deadlock(dumps, threshold_s=2.0)
    assert r is not None and r.task == "writer-1"


def test_the_first_task_by_name_is_reported():
    dumps = {"writer-b": dump(blocked_s=5.0), "writer-a": dump(blocked_s=3.0)}
    assert find_deadlock(dumps, 2.0).task == "writer-a"


def test_the_first_matching_mail_gives_the_position():
    mails = mailbox("CheckpointNotice", "Other", "CommitAckEvent", "CommitAckEvent")
    r = find_deadlock({"w": dump(mails=mails)}, 2.0)
    assert r.mailbox_position == 2 and r.releasing_mail == "CommitAckEvent #12"


def test_nothing_below_the_threshold():
    assert find_deadlock({"writer-0": dump(blocked_s=1.99)}, threshold_s=2.0) is None
    assert find_deadlock({"writer-0": dump(blocked_s=2.0)}, threshold_s=2.0) is not None


def test_releasing_mail_not_in_the_mailbox_is_a_stall_not_a_deadlock():
    d = dump(blocked_s=10.0, mails=mailbox("CheckpointNotice"))
    assert find_deadlock({"writer-0": d}, threshold_s=2.0) is None
    stalls = find_stalls({"writer-0": d}, threshold_s=2.0)
    assert stalls == [
        Stall("writer-0", "instant initialize", "a new pending instant on the timeline or a CommitAckEvent", 10.0)
    ]


def test_a_wait_with_no_releasing_mail_is_never_a_deadlock():
    # P2 waits for a DFS file: no mail of its own mailbox can end it
    d = dump(
        blocked_s=60.0,
        releasing=None,
        mails=mailbox("CommitAckEvent"),
        waiting_on="message bus file 3.commit or 3.aborted",
    )
    assert find_deadlock({"writer-0": d}, threshold_s=2.0) is None
    assert [s.task for s in find_stalls({"writer-0": d}, 2.0)] == ["writer-0"]


def test_empty_mailbox_is_no_deadlock():
    assert find_deadlock({"writer-0": dump(mails=[])}, 2.0) is None


def test_stalls_respect_the_threshold_and_ignore_unblocked_tasks():
    outside = dict(releasing=None, waiting_on="message bus file 3.commit or 3.aborted")
    dumps = {
        "d": dump(blocked_s=4.0, **outside),
        "b": dump(blocked_s=3.0, **outside),
        "a": dump(blocked_s=0.5, **outside),
        "c": dump(blocked_s=None),
    }
    assert [s.task for s in find_stalls(dumps, 1.0)] == ["b", "d"]  # sorted by name
    assert find_stalls(dumps, 10.0) == []


def test_a_deadlocked_task_is_not_also_listed_as_a_stall():
    dumps = {"writer-0": dump(blocked_s=5.0)}
    assert find_deadlock(dumps, 2.0) is not None
    assert find_stalls(dumps, 2.0) == []


def test_idle_running_mail_is_described():
    d = dump(running=None)
    assert find_deadlock({"w": d}, 2.0).running_mail == "nothing (idle)"
    d = dump(running=MailRun("mail", "CheckpointBarrier", "snapshot ckp 4", 99.5))
    assert find_deadlock({"w": d}, 2.0).running_mail == "snapshot ckp 4"


def test_explanation_names_the_cycle_and_the_facts():
    r = find_deadlock({"writer-3": dump(blocked_s=4.25, input_queue=2)}, 2.0)
    text = r.explanation
    assert text == explain(r, dump(blocked_s=4.25, input_queue=2))
    assert text.startswith("DEADLOCK in writer-3")
    assert "4.2s" in text or "4.3s" in text
    assert "writer-3 -> CommitAckEvent #11 -> writer-3" in text
    assert "position 1 of writer-3's own mailbox" in text
    assert "process batch of 500 rows" in text
    assert "[0] CheckpointNotice #10, [1] CommitAckEvent #11" in text
    assert "2 input item(s)" in text


def test_explanation_without_input_queue_has_no_behind_it_line():
    r = find_deadlock({"w": dump(input_queue=0)}, 2.0)
    assert "behind it" not in r.explanation


def test_the_result_record_keeps_a_compact_mailbox():
    r = find_deadlock({"w": dump()}, 2.0)
    assert r.task == "w" and r.mailbox_position == 1
    assert r.to_json()["mailbox"][1] == {
        "position": 1,
        "kind": "CommitAckEvent",
        "description": "CommitAckEvent #11",
        "priority": 0,
    }
    assert r.explanation.startswith("DEADLOCK")


def test_many_stalls_are_counted_and_the_longest_named():
    """A job of 256 writers that timed out says how many tasks stalled and names the three
    longest, on one line, instead of 256 clauses."""
    stalls = [Stall(f"writer-{i}", "instant initialize", "the coordinator", 1.0 + i / 100) for i in range(256)]
    text = stalls_text(stalls)
    assert text.startswith("256 tasks, the longest: writer-255 instant initialize for 3.5s")
    assert text.count("writer-") == 3 and "\n" not in text
    few = stalls_text(stalls[:2])
    assert few.startswith("writer-0 instant initialize for 1.0s (the coordinator); writer-1")
    assert stalls_text([]) == "none"
