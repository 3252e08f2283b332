"""The conformance check's verdict: the tables, the timelines and the counts of the lab's run and
Hudi's own writer's, compared (runtime.conformance). Hudi's side is a recorded document here; the
harness itself runs in tests/conformance/test_real_hudi.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from runtime.cli.command import main
from runtime.conformance import releases
from runtime.conformance.comparison import TimelineShape, compare_contents, timeline_differences
from runtime.conformance.real_run import RealRun


def _real_doc(**over) -> dict:
    doc = {
        "release": "0.14.0",
        "flink": "1.17.2",
        "table_type": "COPY_ON_WRITE",
        "writers": 2,
        "checkpoints": 2,
        "wall_s": 3.5,
        "options": {"index.type": "BUCKET"},
        "instants": [
            {
                "instant": "20261125000000000",
                "action": "commit",
                "states": [{"state": "REQUESTED", "time_ms": 1.0}, {"state": "COMPLETED", "time_ms": 9.0}],
                "files": [{"path": "p0/f.parquet", "bytes": 100}],
                "records": 10,
            }
        ],
        "metadata_table_instants": [],
        "checkpoints_detail": [
            {"id": 1, "completed_ms": 1000.0, "commit_completed_ms": 1250.0},
            {"id": 2, "completed_ms": 3000.0, "commit_completed_ms": None},
        ],
        "fs_calls": [
            {"role": "write_task", "component": "ckp_meta", "op": "list", "count": 4},
            {"role": "coordinator", "component": "timeline", "op": "exists", "count": 3},
            {"role": "coordinator", "component": "markers", "op": "mkdirs", "count": 1},
        ],
        "fs_calls_by_checkpoint": [],
        "fs_callers": [
            {
                "component": "timeline",
                "op": "open",
                "role": "write_task",
                "caller": "HoodieTableConfig.fetchConfigs",
                "count": 6,
            },
            {"component": "timeline", "op": "exists", "role": "clean", "caller": "X.y", "count": 2},
        ],
        "error": None,
    }
    return {**doc, **over}


def test_the_harness_record_reads_in_the_lab_s_vocabulary():
    real = RealRun.from_json(_real_doc())
    calls = {(c.role, c.component, c.op): c.count for c in real.fs_calls}
    # ckp_meta files are checkpoint messages; a status call is what the lab's exists and stat are
    assert calls == {
        ("write_task", "messages", "list"): 4,
        ("coordinator", "timeline", "status"): 3,
        ("coordinator", "markers", "mkdirs"): 1,
    }
    assert real.commit_latencies_s() == [0.25]  # checkpoint 2's commit never completed
    assert real.instants[0].completed and real.instants[0].files == {"p0/f.parquet": 100}
    # where Hudi's counts come from: the Hudi method behind each kind of call
    assert [(c.method, c.op, c.count) for c in real.callers] == [
        ("HoodieTableConfig.fetchConfigs", "open", 6),
        ("X.y", "status", 2),
    ]


def _rows(values: list[tuple[str, int]]) -> pa.Table:
    return pa.table(
        {
            "_hoodie_commit_time": ["1"] * len(values),
            "key": [k for k, _ in values],
            "ts": [v for _, v in values],
        }
    )


def test_equal_tables_are_equal_whatever_their_commit_times_and_order():
    lab = _rows([("a", 1), ("b", 2)])
    real = _rows([("b", 2), ("a", 1)]).set_column(0, "_hoodie_commit_time", pa.array(["2", "2"]))
    assert compare_contents(lab, real, "key").equal


def test_a_changed_value_a_missing_key_and_an_extra_key_are_each_named():
    got = compare_contents(_rows([("a", 1), ("b", 2), ("c", 3)]), _rows([("a", 1), ("b", 5), ("d", 4)]), "key")
    assert not got.equal
    assert (got.only_lab, got.only_real, got.different) == (1, 1, 1)
    assert any(e.startswith("c: only in the lab") for e in got.examples)
    assert any(e.startswith("d: only in the real") for e in got.examples)
    assert any(e.startswith("b: lab") for e in got.examples)


def _shape(completed: dict[str, int], pending: dict[str, int] | None = None, metadata: bool = False) -> TimelineShape:
    return TimelineShape(completed, pending or {}, completed.get("commit", 0), 1.0, 1.0, 1.0, metadata, 6)


def test_a_missing_commit_fails_the_check_and_a_named_difference_does_not():
    unexplained, named = timeline_differences(_shape({"commit": 3}), _shape({"commit": 4}))
    assert unexplained == ["completed commit: the lab's table 3, Hudi's 4"] and named == []
    unexplained, named = timeline_differences(_shape({"commit": 4}), _shape({"commit": 4, "clean": 1}, metadata=True))
    assert unexplained == []
    assert [n.split(":")[0] for n in named] == ["completed clean", "metadata table"]


def test_a_protocol_without_a_runnable_release_is_refused_before_anything_runs(capsys):
    assert main(["conformance", "--protocol", "coordination-rpc", "--out", "/nonexistent/x"]) == 2
    err = capsys.readouterr()
    text = err.out + err.err
    assert "no Hudi 1.x Flink bundle" in text and "ckp-meta (Hudi 0.14.0)" in text


def test_an_unbuilt_harness_says_how_to_build_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(releases, "HARNESS_DIR", tmp_path)
    assert main(["conformance", "--out", str(tmp_path / "out")]) == 2
    text = "".join(capsys.readouterr())
    assert "not built" in text and "-P hudi-0.14.0" in text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("release", ["0.13.0", "1.1.0"])
def test_an_unknown_release_names_the_ones_that_run(release, capsys):
    assert main(["conformance", "--release", release, "--out", "/nonexistent/x"]) == 2
    assert "0.14.0, 0.14.1" in "".join(capsys.readouterr())


def test_an_out_folder_holding_a_check_is_refused_before_anything_runs(tmp_path, capsys):
    if not releases.RELEASES["0.14.0"].jar.is_file():
        pytest.skip("the refusal comes after the harness check; scripts/setup.sh builds the harness")
    (tmp_path / "copy-on-write" / "lab").mkdir(parents=True)
    assert main(["conformance", "--table-type", "copy-on-write", "--out", str(tmp_path)]) == 2
    said = " ".join("".join(capsys.readouterr()).split())  # the console wraps a long --out path
    assert "already holds a copy-on-write check" in said
