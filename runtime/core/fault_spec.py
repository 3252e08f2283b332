"""What a fault is: the named fault points, their ``--faults`` spelling (``FaultSpec``,
``parse_faults``) and the crash a point raises. The injector that fires them is
``runtime.faults.injector``; the spec lives here because the job's configuration carries it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.core import codec


class InjectedCrash(RuntimeError):
    """A fault point crashed the role (the process exits when the host can make it)."""


# id -> what happens there. Ids are stable: scenarios and results refer to them.
FAULT_POINTS: dict[str, str] = {
    "task.before_flush": "a write task crashes just before a flush writes its base file",
    "task.after_flush_before_event": "a write task crashes after a flush, before its WriteMetadataEvent",
    "task.in_snapshot": "a write task crashes inside the barrier snapshot, after flushing, before acking",
    "task.after_checkpoint_before_commit": "a write task crashes after acking a checkpoint, before its commit",
    "coordinator.before_commit_file": "the coordinator crashes before writing the commit file",
    "coordinator.after_commit_before_next_instant": "the coordinator crashes after the commit, before the next instant",
    "checkpoint.abort": "the job manager aborts a checkpoint",
    "checkpoint.timeout": "a write task acks a checkpoint too late: it times out",
    "checkpoint.notification_lost": "the checkpoint-complete notification never reaches the coordinator",
    "dfs.transient_error": "the coordinator's first DFS write or create after the checkpoint's trigger fails",
    "dfs.latency": "the coordinator's DFS operations each take `param` s longer (default 0.2) for 5 s",
    "bus.deleted": "the protocol's message directory (message_bus, ckp_meta) is deleted while the job runs "
    "(#8060; P2, P2b, P3)",
    "bus.deleted_between_restarts": "a write task crashes and the protocol's message directory "
    "(message_bus, ckp_meta) is deleted before the job restarts (#8060, #8120; P2, P2b, P3)",
    "message.dropped": "one message to `target` is lost in transit (a request: the caller times out)",
    "message.delayed": "one message to `target` arrives `param` s late (default 2), and its sender's later "
    "messages to the same receiver wait behind it",
    "compaction.crash_during": "a compaction task crashes after writing a compacted base file, before reporting it "
    "(merge-on-read; `checkpoint`: the one whose completion ran the plan, `task`: the compaction task)",
    "compaction.failed": "a compaction task fails to compact a file group and reports it failed: the commit sink "
    "rolls the compaction back and it runs again (merge-on-read)",
    "compaction.commit_lost": "the compaction commit sink crashes before writing the compaction's commit "
    "(merge-on-read)",
    "tasks.fail_at_instant_start": "every write task fails over at once while the coordinator "
    "starts a new instant (HUDI-6194); `param`: seconds the last "
    "task takes to come back",
    "control_topic.consumer_restarted": "a participant's control-topic consumer restarts after the k-th "
    "START_COMMIT it received and is away `param` s (default 2): it comes back at the end of the topic "
    "(auto.offset.reset=latest), missing what was sent meanwhile (control-topic; model and broker)",
}

# the message a messaging fault hits when the spec names none: the task's write metadata event
DEFAULT_MESSAGE_TARGET = "write_metadata"
MESSAGE_FAULTS = ("message.dropped", "message.delayed")
DEFAULT_PARAM = {"dfs.latency": 0.2, "message.delayed": 2.0, "control_topic.consumer_restarted": 2.0}
DFS_LATENCY_WINDOW_S = 5.0


@codec.message
@dataclass
class FaultSpec:
    point: str
    checkpoint: int = -1  # fire at this checkpoint id (-1: the first time the point is reached)
    task: int = -1  # only in this write task (-1: any)
    times: int = 1
    param: float = 0.0  # e.g. the delay of a timeout fault, in seconds
    target: str = ""  # the RPC method a messaging fault hits (e.g. write_metadata, operator_event)

    def key(self) -> str:
        return f"{self.point}@{self.checkpoint}#{self.task}" + (f":{self.target}" if self.target else "")

    @property
    def value(self) -> float:
        """``param``, or the point's default when unset."""
        return self.param or DEFAULT_PARAM.get(self.point, 0.0)

    def text(self) -> str:
        """The ``--faults`` spelling of this spec (``parse_faults`` reads it back)."""
        out = self.point + (f":{self.target}" if self.target else "")
        out += (f"@{self.checkpoint}" if self.checkpoint >= 0 else "") + (f"#{self.task}" if self.task >= 0 else "")
        return out + (f"={self.param:g}" if self.param else "")


_SPEC = re.compile(
    r"^(?P<point>[a-z_.]+)(?::(?P<target>\w+))?(?:@(?P<ckp>\d+))?(?:#(?P<task>\d+))?"
    r"(?:=(?P<param>\d+(?:\.\d*)?))?$"
)


def parse_faults(text: str) -> list[FaultSpec]:
    """``point[:target][@checkpoint][#task][=param]`` items, comma-separated:
    ``task.in_snapshot@2#0``, ``message.dropped:operator_event@3``, ``dfs.latency=0.5``."""
    specs = []
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        m = _SPEC.match(item)
        if m is None:
            raise ValueError(
                f"cannot read fault {item!r}: write point[:target][@checkpoint][#task][=param], "
                "e.g. task.in_snapshot@2#0 or message.delayed:write_metadata@2=1.5"
            )
        point = m["point"]
        if point not in FAULT_POINTS:
            raise ValueError(f"unknown fault point {point!r}; known: {', '.join(FAULT_POINTS)}")
        if m["target"] and point not in MESSAGE_FAULTS:
            raise ValueError(f"{item!r}: only {' and '.join(MESSAGE_FAULTS)} take a :target")
        specs.append(
            FaultSpec(
                point,
                int(m["ckp"]) if m["ckp"] else -1,
                int(m["task"]) if m["task"] else -1,
                param=float(m["param"]) if m["param"] else 0.0,
                target=m["target"] or "",
            )
        )
    return specs
