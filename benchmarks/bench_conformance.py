"""The lab against Hudi's own Flink writer: every protocol with a release that runs here x both
table types x writer counts, the lab/Hudi ratio of each cost component.

    [PYTHONPATH=<checkout>] .venv/bin/python benchmarks/bench_conformance.py [--writers 2,16]
                                                 [--protocol ckp-meta] [--release 0.14.0]
                                                 [--checkpoints 4] [--records-per-writer 1000]
                                                 [--out benchmarks/results/conformance.json]

Each cell is one ``commitlab conformance`` check (``runtime.conformance.run.run_check``): the lab
on the simulator, Hudi's writer in the conformance/ harness, on the same records. Prints a markdown
table of lab/Hudi ratios (DFS calls per checkpoint by part of the table and by role, files and bytes
per commit, whether the tables are equal) and writes every comparison to ``--out``. Measures and
prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402  (sets sys.path to the project root)

from runtime.conformance.comparison import Comparison, Ratio  # noqa: E402
from runtime.conformance.releases import RELEASES, release_for  # noqa: E402
from runtime.conformance.run import run_check  # noqa: E402
from runtime.core.config import JobConfig  # noqa: E402
from runtime.core.job_options import TABLE_TYPES  # noqa: E402

PARTS = ("data", "timeline", "markers", "messages", "metadata", "aux", "clean", "rollback", "archive")


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:g}"


def _cell(r: Ratio) -> str:
    return f"{_num(r.lab)} / {_num(r.real)}" + ("" if r.ratio is None else f" ({r.ratio:g})")


def markdown(rows: list[tuple[int, Comparison]]) -> str:
    head = ["writers", "table", "rows equal", "files/commit", "bytes/commit", *PARTS, "write tasks", "coordinator"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for writers, c in rows:
        parts = [_cell(c.per_checkpoint.get(p, Ratio(0, 0))) for p in PARTS]
        roles = [_cell(c.per_role.get(r, Ratio(0, 0))) for r in ("write_task", "coordinator")]
        cells = [str(writers), c.table_type, "yes" if c.contents.equal else "NO"]
        cells += [_cell(c.files_per_commit), _cell(c.bytes_per_commit), *parts, *roles]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", default="2,16")
    ap.add_argument("--protocol", default="ckp-meta")
    ap.add_argument("--release", default=None, choices=list(RELEASES))
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--records-per-writer", type=int, default=1_000)
    ap.add_argument("--out", default="benchmarks/results/conformance.json")
    args = ap.parse_args()
    console = common.console()
    release = release_for(args.protocol, args.release)
    rows: list[tuple[int, Comparison]] = []
    with tempfile.TemporaryDirectory(prefix="conformance-") as work:
        for writers in [int(w) for w in args.writers.split(",")]:
            for table_type in TABLE_TYPES:
                cfg = JobConfig(
                    protocol=args.protocol,
                    source="generator",
                    writers=writers,
                    checkpoints=args.checkpoints,
                    records=writers * args.records_per_writer,
                    table_type=table_type,
                ).validate()
                out = os.path.join(work, f"w{writers}")
                say = lambda phase: console.print(f"  {phase}")  # noqa: E731
                rows.append((writers, run_check(cfg, release, out, seed=0, timeout_s=600.0, on_phase=say)))
    doc = {
        "environment": common.environment(),
        "protocol": args.protocol,
        "release": release.hudi,
        "flink": release.flink,
        "checkpoints": args.checkpoints,
        "records_per_writer": args.records_per_writer,
        "checks": [{"writers": w, **c.to_json()} for w, c in rows],
    }
    common.write_json(args.out, doc)
    print(f"lab/Hudi ({args.protocol}, Hudi {release.hudi} on Flink {release.flink}); each cell: lab/Hudi (ratio)")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
