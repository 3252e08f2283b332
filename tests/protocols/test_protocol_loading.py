"""A researcher's own protocol in one file outside the project (docs/PROTOCOL_API.md): loaded by
path, path:Class, module or entry point, run through simulate, compare, faults and explore in the
simulator; a file that does not implement the API is refused with exit 2, naming what is missing."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.cli.exits import ExitCode
from runtime.core.config import JobConfig
from runtime.core.errors import UserError
from runtime.lab.compare import run_compare
from runtime.lab.fault_matrix import run_matrix
from runtime.protocols import PROTOCOLS, get_protocol
from runtime.protocols.loading import ProtocolSpecError
from runtime.sim import simulate

TEMPLATE = Path(__file__).resolve().parents[2] / "docs" / "protocol_template.py"
NAME = "my-poll-timeline"  # the template's Protocol.name


@pytest.fixture
def own_protocol(tmp_path: Path) -> Path:
    """The template copied outside the package, as a user would."""
    path = tmp_path / "research" / "my_protocol.py"
    path.parent.mkdir()
    shutil.copy(TEMPLATE, path)
    return path


def _sim(cfg: JobConfig, sub: str) -> object:
    return simulate(cfg, seed=1, storage="memory", max_real_s=120.0)


def test_a_file_outside_the_project_runs_in_simulate_under_its_own_name(own_protocol, tmp_path):
    out = tmp_path / "out"
    args = ["simulate", "--protocol", str(own_protocol), "--records", "2000", "--checkpoints", "3", "--quiet"]
    assert main([*args, "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["protocol"] == NAME
    assert result["exactly_once"]["verified"] is True


def test_a_file_protocol_sits_beside_the_shipped_ones_in_compare(own_protocol, tmp_path):
    base = JobConfig(source="generator", writers=2, checkpoints=3, records=2_000)
    specs = ["message-bus", f"{own_protocol}:PollTimelineProtocol"]
    subs: list[str] = []

    def run(cfg: JobConfig, sub: str) -> object:
        subs.append(sub)
        return _sim(cfg, sub)

    doc = run_compare(base, specs, str(tmp_path / "cmp"), run=run, rtt={"p50_s": 0.002, "p99_s": 0.004})
    assert list(doc["protocols"]) == ["message-bus", NAME]
    assert doc["protocols"][NAME]["exactly_once"] is True
    assert subs[1] == str(tmp_path / "cmp" / NAME)  # its directory is named by its name, not its path


def test_a_file_protocol_has_a_row_in_the_fault_matrix(own_protocol, tmp_path):
    doc = run_matrix(
        JobConfig(source="generator", writers=2, checkpoints=4, records=2_000),
        [str(own_protocol)],
        ["bus.deleted"],
        1,
        str(tmp_path / "faults"),
        run=_sim,
    )
    assert doc["protocols"] == [NAME]
    assert [(r["protocol"], r["outcome"]) for r in doc["runs"]] == [(NAME, "n/a")]  # no bus on the DFS


def test_a_file_protocol_is_explored_in_worker_processes_with_replayable_findings(own_protocol, tmp_path):
    out = tmp_path / "explore"
    args = ["explore", "--scenario", "deadlock", "--seeds", "2", "--jobs", "2", "--protocol", str(own_protocol)]
    # the template keeps P1's design, so the deadlock scenario finds P1's deadlock in it
    assert main([*args, "--quiet", "--out", str(out)]) == ExitCode.FAILED
    doc = json.loads((out / "explore.json").read_text())
    assert sum(doc["counts"][str(own_protocol)].values()) == 2  # each worker process loaded the file
    failing = [r for r in doc["runs"] if r["outcome"] != "passed"]
    assert failing and all(f"--protocol {own_protocol} " in r["replay"] for r in failing)


def test_a_module_path_and_an_entry_point_load_the_same_protocol(own_protocol, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(own_protocol.parent))
    assert get_protocol("my_protocol:PollTimelineProtocol").name == NAME
    assert get_protocol("my_protocol").name == NAME
    dist = tmp_path / "site" / "my_protocol_pkg-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-protocol-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[commitlab.protocols]\npoll = my_protocol:PollTimelineProtocol\n")
    monkeypatch.syspath_prepend(str(dist.parent))
    assert get_protocol("poll").name == NAME
    monkeypatch.delitem(sys.modules, "my_protocol")


BROKEN = {
    "syntax": ("class Oops(:\n", "SyntaxError"),
    "none": ("X = 1\n", "exactly one Protocol subclass (found: none)"),
    "two": (
        "from runtime.protocols.base import Protocol\nclass A(Protocol):\n    name = 'a'\n"
        "class B(Protocol):\n    name = 'b'\n",
        "found: A, B",
    ),
    "abstract": (
        "from runtime.protocols.base import CoordinatorSide, Protocol, WriterSide\n"
        "class W(WriterSide):\n    pass\n"
        "class P(Protocol):\n    name = 'p'\n    writer_side = W\n    coordinator_side = CoordinatorSide\n",
        "W.instant_to_write",
    ),
    "no name": (
        "from runtime.protocols.base import Protocol\nclass P(Protocol):\n    pass\n",
        "a non-empty `name`",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_file_that_does_not_implement_the_api_exits_2_naming_the_problem(case, tmp_path, capsys):
    text, why = BROKEN[case]
    path = tmp_path / f"bad_{case.replace(' ', '_')}.py"
    path.write_text(text)
    with pytest.raises(ProtocolSpecError) as exc:
        get_protocol(str(path))
    assert why in str(exc.value) and str(path) in str(exc.value)
    assert isinstance(exc.value, UserError)
    assert main(["run", "--protocol", str(path), "--out", str(tmp_path / "out")]) == 2
    assert main(["compare", "--protocols", f"message-bus,{path}", "--out", str(tmp_path / "out")]) == 2
    printed = capsys.readouterr()
    assert printed.out.count(why) + printed.err.count(why) == 2  # each command says what is wrong


def test_a_missing_file_or_class_and_a_shipped_name_taken_are_refused(own_protocol, tmp_path):
    with pytest.raises(ProtocolSpecError, match="no file"):
        get_protocol(str(tmp_path / "nowhere.py"))
    with pytest.raises(ProtocolSpecError, match="no Protocol subclass 'Nope'"):
        get_protocol(f"{own_protocol}:Nope")
    with pytest.raises(ProtocolSpecError, match="not a shipped protocol") as unknown:
        get_protocol("carrier-pigeon")
    assert all(name in str(unknown.value) for name in PROTOCOLS)  # the choices, as --help lists them
    clash = tmp_path / "clash.py"
    clash.write_text(own_protocol.read_text().replace(f'name = "{NAME}"', 'name = "message-bus"'))
    with pytest.raises(ProtocolSpecError, match="a shipped protocol's name"):
        get_protocol(str(clash))
    assert get_protocol("message-bus") is PROTOCOLS["message-bus"]  # the shipped one is untouched
