"""commitlab report: one self-contained page for a run, a compare, a fault matrix and an
exploration, loaded in headless Chromium (Debian's package, which scripts/setup.sh installs):
what a reader sees is asserted on the page Chromium renders, not on the HTML text."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.core.config import JobConfig
from runtime.faults.scenarios import with_quiet_round
from runtime.lab.compare import plot_compare, run_compare
from runtime.lab.fault_matrix import plot_heatmap, run_matrix
from runtime.lab.html_report import build_report, write_report
from runtime.sim import simulate

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _sim_runner(cfg: JobConfig, sub: str) -> dict:
    return simulate(cfg, seed=1, storage="memory", max_real_s=120.0)


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory) -> Path:
    """One directory holding the four records a user may point the report at."""
    d = tmp_path_factory.mktemp("lab")
    # a run: P1's deadlock under the simulator, traced (result.json, trace.json, timeline.png)
    sim = ["simulate", "--storage", "memory", "--protocol", "operator-event", "--scenario", "deadlock"]
    assert main([*sim, "--trace", "--quiet", "--out", str(d)]) == 3
    base = with_quiet_round(JobConfig(source="generator", writers=2, checkpoints=4, records=2_000))
    doc = run_compare(base, ["operator-event", "message-bus"], str(d), run=_sim_runner)
    plot_compare(doc, str(d))
    matrix_base = JobConfig(source="generator", writers=2, checkpoints=4, records=2_000, bucket_flush_rows=250)
    faults = run_matrix(matrix_base, ["message-bus"], ["task.in_snapshot", "quiet-round"], 1, str(d), run=_sim_runner)
    plot_heatmap(faults, str(d))
    explore = ["explore", "--scenario", "deadlock", "--seeds", "3", "--protocol", "operator-event"]
    assert main([*explore, "--quiet", "--out", str(d)]) == 0
    return d


class _VisibleText(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.images: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script", "title"):
            self._hidden += 1
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title"):
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def _chromium(*args: str, user_data: Path) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
    flags += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    return subprocess.run(
        [str(CHROMIUM), *flags, f"--user-data-dir={user_data}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_the_page_holds_every_record_with_its_commands(lab_dir):
    page = build_report(str(lab_dir))
    assert page.count("data:image/png;base64,") == 4  # timeline, latency, DFS operations, heat map
    assert "commitlab simulate --config" in page and "commitlab replay --seed" in page
    assert "<script" not in page and "http://" not in page  # self-contained, nothing fetched


def test_a_directory_without_records_is_refused(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "holds none of result.json" in capsys.readouterr().out


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh installs it as root)"
)
def test_chromium_shows_what_a_reader_needs(lab_dir, tmp_path):
    path = write_report(str(lab_dir))
    dom = _chromium("--dump-dom", f"file://{path}", user_data=tmp_path / "profile").stdout
    seen = _VisibleText()
    seen.feed(dom)
    text = " ".join(" ".join(seen.parts).split())
    assert "Run: operator-event, 2 writers, on the simulator" in text
    assert "DEADLOCK in writer-" in text and "CommitAckEvent" in text  # the explanation
    assert "Comparison: 2 writers, 4 checkpoints" in text and "message-bus" in text
    assert "Fault matrix: 2 runs" in text and "known failure" in text
    assert "Exploration: scenario deadlock" in text and "commitlab replay --seed" in text
    assert "Open trace file" in text and len(seen.images) == 4
    shot = tmp_path / "page.png"
    _chromium(f"--screenshot={shot}", "--window-size=1200,2400", f"file://{path}", user_data=tmp_path / "profile")
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] >= 2000 and pixels.std() > 0.05  # text and pictures, not a blank page
    assert os.path.getsize(shot) > 50_000


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh installs it as root)"
)
def test_a_both_types_compare_shows_both_halves_and_every_link_resolves(tmp_path):
    from runtime.lab.run_output import write_result

    def runner(cfg: JobConfig, sub: str) -> dict:
        result = simulate(cfg, seed=1, storage="disk", workdir=sub, max_real_s=120.0)  # merge-on-read: a real disk
        write_result(sub, result)  # as run_job leaves each run's record under out/<type>/<protocol>
        return result

    d = tmp_path / "both"
    base = JobConfig(source="generator", writers=2, checkpoints=3, records=1_000)
    types = ["copy-on-write", "merge-on-read"]
    doc = run_compare(base, ["message-bus", "ckp-meta"], str(d), run=runner, table_types=types)
    plot_compare(doc, str(d))
    path = write_report(str(d))
    dom = _chromium("--dump-dom", f"file://{path}", user_data=tmp_path / "profile").stdout
    seen, links = _VisibleText(), _Links()
    seen.feed(dom)
    links.feed(dom)
    text = " ".join(" ".join(seen.parts).split())
    assert "copy-on-write" in text and "merge-on-read" in text
    assert text.count("ckp-meta") >= 4  # a row and a record link in each half
    assert len(seen.images) == 3  # latency, DFS operations, table_types.png
    local = [h for h in links.hrefs if "://" not in h]
    assert sorted(local) == sorted(f"{t}/{p}/result.json" for t in types for p in ("message-bus", "ckp-meta"))
    for href in local:  # followed as the reader's browser follows it
        target = d / href
        assert target.is_file(), href
        shown = _chromium("--dump-dom", target.as_uri(), user_data=tmp_path / "profile").stdout
        assert '"protocol"' in shown and "ERR_FILE_NOT_FOUND" not in shown, href
