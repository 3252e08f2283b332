"""An output a command cannot write (a read-only directory, a path through a file) is refused with
exit 2 and a line naming the flag, before any work and without a traceback: explore, shrink,
replay --real-parquet, report --html and timeline's PNG, as run, simulate and check already did."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.cli.command import main


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _a_file(tmp_path: Path) -> Path:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    return blocker


@pytest.mark.parametrize(
    "args",
    [
        ["explore", "--scenario", "deadlock", "--seeds", "1", "--protocol", "ckp-meta", "--quiet", "--out", "{out}"],
        ["shrink", "--seed", "5", "--protocol", "ckp-meta", "--scenario", "deadlock", "--out", "{out}"],
        [
            "replay",
            "--seed",
            "5",
            "--protocol",
            "ckp-meta",
            "--scenario",
            "deadlock",
            "--real-parquet",
            "--out",
            "{out}",
        ],
    ],
    ids=["explore", "shrink", "replay"],
)
def test_an_out_under_a_file_is_refused_before_any_run(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _a_file(tmp_path) / "out"
    code, text = _run([a.format(out=out) for a in args], capsys)
    assert code == 2, text
    assert "--out" in text and "is a file, not a directory" in text, text
    assert "Traceback" not in text and "shrinking" not in text, text


def test_an_out_directory_this_user_cannot_write_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "read-only"
    out.mkdir()
    real_access = os.access
    # root may write a mode-555 directory, so the permission itself is what the test takes away
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: p != str(out) and real_access(p, mode, **kw))
    code, text = _run(
        ["explore", "--scenario", "deadlock", "--seeds", "1", "--protocol", "ckp-meta", "--out", str(out)], capsys
    )
    assert code == 2, text
    assert "not writable by this user; choose another --out" in text, text
    assert not (out / "explore.json").exists()


def test_report_and_timeline_refuse_an_unwritable_page_or_picture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = _a_file(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    code, text = _run(["report", str(run_dir), "--html", str(blocker / "report.html")], capsys)
    assert code == 2 and "--html" in text and "Traceback" not in text, text
    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": []}')
    code, text = _run(["timeline", str(trace), str(blocker / "timeline.png")], capsys)
    assert code == 2 and "OUT (the PNG)" in text and "Traceback" not in text, text
