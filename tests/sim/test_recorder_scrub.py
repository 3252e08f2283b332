"""The trace recorder scrubs the table's path from every name, keeping the scrubbed names per
scrub map for the whole process (runtime.sim.recorder._SCRUBBED_BY_MAP)."""

from __future__ import annotations

from runtime.sim.recorder import TraceRecorder


def _names(table: str, *names: str) -> list[str]:
    rec = TraceRecorder(lambda: 0.0, scrub={table: "<table>"})
    for name in names:
        rec.add_message("deliver", "writer-0", "coordinator", "handle_event", name, 1)
    return [ev[5] for ev in rec.events]


def test_each_run_scrubs_its_own_table_path_from_names_another_run_met() -> None:
    name = "open /tmp/run-a/table/.hoodie at 0x7f00deadbeef"
    assert _names("/tmp/run-a/table", name) == ["open <table>/.hoodie at 0x?"]
    # another run on another table: the same name is not its table's, so only the address goes
    assert _names("/tmp/run-b/table", name) == ["open /tmp/run-a/table/.hoodie at 0x?"]
    assert _names("/tmp/run-a/table", name, name) == ["open <table>/.hoodie at 0x?"] * 2
