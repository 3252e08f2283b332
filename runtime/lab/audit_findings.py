"""The record of ``commitlab verify --table`` (:func:`runtime.lab.table_audit.audit_table`): each
finding, with its severity (error, warning, info), its kind and the file concerned, and the figures a
reader wants first (completed and pending instants, snapshot rows, file groups).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ERROR, WARNING, INFO = "error", "warning", "info"
READER_CANNOT_OPEN = "reader-cannot-open"
SAMPLE = 10  # the examples a finding names at most


@dataclass(frozen=True)
class Finding:
    severity: str  # error / warning / info
    kind: str
    message: str
    file: str = ""  # table-relative path of the file concerned


@dataclass
class Audit:
    """Everything :func:`~runtime.lab.table_audit.audit_table` found, with the figures a reader wants first."""

    table: str
    findings: list[Finding] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    snapshot_rows: int = 0
    file_groups: int = 0

    def add(self, severity: str, kind: str, message: str, file: str = "") -> None:
        self.findings.append(Finding(severity, kind, message, file))

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def is_table(self) -> bool:
        """Whether the path opened as a Hudi table (else no other check can run)."""
        return not any(f.kind == "not-a-table" for f in self.findings)

    @property
    def reader_opens(self) -> bool:
        """Whether the official reader opened the table (else no read of it can be checked)."""
        return self.is_table and not any(f.kind == READER_CANNOT_OPEN for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "ok": self.ok,
            "completed": len(self.completed),
            "pending": self.pending,
            "snapshot_rows": self.snapshot_rows,
            "file_groups": self.file_groups,
            "findings": [f.__dict__ for f in self.findings],
        }
