"""The verdicts of a run as result.json records them: exactly-once, the committed prefix of a run
that did not finish, and the deadlock the watchdog found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TypedDict

from runtime.core.json_doc import JsonObject
from runtime.hudi.table.merge_rule import MODELLED


class CommitProblem(TypedDict, total=False):
    """A commit whose incremental read disagrees with its metadata (:func:`runtime.lab.verify.verify_commits`)."""

    instant: str
    rows_by_metadata: int
    rows_read: int
    file_groups_differing: dict[str, Sequence[int]]  # file id: (metadata, read)
    rows_with_other_commit_time: int
    keys_twice: int
    reasons: list[str]


def emit(record: object, order: tuple[str, ...], omit_none: frozenset[str]) -> JsonObject:
    """``record``'s fields in ``order`` as JSON, leaving out those of ``omit_none`` that are None
    (the keys a producer did not write)."""
    out: JsonObject = {}
    for name in order:
        value = getattr(record, name)
        if value is None and name in omit_none:
            continue
        out[name] = value
    return out


def known_fields(cls: type, doc: JsonObject) -> JsonObject:
    """The entries of ``doc`` that are fields of the dataclass ``cls``."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in doc.items() if k in names}


_COUNTS = ("expected", "actual", "lost", "duplicated", "unexpected", "mismatched")


@dataclass
class ExactlyOnce:
    """The exactly-once verdict of a finished run: the table's snapshot against the expected
    state, record by record, and (the official reader) every commit's incremental read against
    its metadata. ``error``: the table could not be read (the counts are then None)."""

    verified: bool
    expected: int
    actual: int | None = None
    lost: int | None = None
    duplicated: int | None = None
    unexpected: int | None = None
    mismatched: int | None = None
    identity: str | None = None  # "(partition path, record key)" or "record key"
    samples: dict[str, list[str]] = field(default_factory=dict)  # a few of each kind, shown
    error: str | None = None
    commits_checked: int | None = None
    commit_problems: list[CommitProblem] | None = None
    reader: str | None = None  # the simulated disk's own snapshot reader, when it was used

    _ORDER = ("verified", "identity", *_COUNTS, "error", "samples", "commits_checked", "commit_problems", "reader")
    _OPTIONAL = frozenset({"identity", "error", "commits_checked", "commit_problems", "reader"})

    def to_json(self) -> JsonObject:
        return emit(self, self._ORDER, self._OPTIONAL)

    @classmethod
    def from_json(cls, doc: JsonObject) -> ExactlyOnce:
        return cls(**known_fields(cls, doc))


@dataclass
class CommittedPrefix:
    """A run that did not finish: whether its commits hold exactly what they should
    (:mod:`runtime.lab.prefix`). ``prefix`` names the records they must hold; ``verified`` is
    None when it could not be checked (the Spark source keeps no copy of the stream)."""

    verified: bool | None
    prefix: str
    identity: str | None = None
    expected: int | None = None
    actual: int | None = None
    lost: int | None = None
    duplicated: int | None = None
    unexpected: int | None = None
    mismatched: int | None = None
    samples: dict[str, list[str]] | None = None
    error: str | None = None

    _ORDER = ("verified", "identity", *_COUNTS, "samples", "prefix", "error")
    _OPTIONAL = frozenset(_ORDER) - {"verified", "prefix"}

    def to_json(self) -> JsonObject:
        return emit(self, self._ORDER, self._OPTIONAL)

    @classmethod
    def from_json(cls, doc: JsonObject) -> CommittedPrefix:
        return cls(**known_fields(cls, doc))


@dataclass
class QueuedMail:
    """A mail of the deadlocked task's mailbox, in take order."""

    position: int
    kind: str
    description: str
    priority: int


@dataclass
class Deadlock:
    """The deadlock the watchdog found (:mod:`runtime.lab.deadlock`): a task whose mailbox thread
    waits for a mail in its own mailbox."""

    task: str
    running_mail: str
    waiting_for: str
    releasing_mail: str
    mailbox_position: int
    blocked_s: float
    blocked_checkpoint: int
    explanation: str
    mailbox: list[QueuedMail]

    def to_json(self) -> JsonObject:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "mailbox"}
        out["mailbox"] = [vars(m).copy() for m in self.mailbox]
        return out

    @classmethod
    def from_json(cls, doc: JsonObject) -> Deadlock:
        mailbox = [QueuedMail(**m) for m in doc["mailbox"]]
        return cls(**{**known_fields(cls, doc), "mailbox": mailbox})


@dataclass
class TableBefore:
    """The table as a run found it, read by the official reader before the first checkpoint: the
    state the run's stream is merged into for the expected state (``merge_rule``). ``as_of``: the
    last completed instant then (None: the table was empty or new), so ``verify --result`` reads
    the same state back by time travel and checks it against ``content_hash``."""

    rows: int
    content_hash: str
    as_of: str | None = None
    merge_rule: str = MODELLED.value  # the rule the writer and the checker applied

    def to_json(self) -> JsonObject:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, doc: JsonObject) -> TableBefore:
        return cls(**known_fields(cls, doc))
