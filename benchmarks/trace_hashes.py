"""The trace hash of every exploration scenario x protocol x seed, and of the simulator speed
benchmark's workload: the proof that a change which should change no behaviour changed none.

    .venv/bin/python benchmarks/trace_hashes.py [--seeds 2] --out before.json
    # ...change the code...
    .venv/bin/python benchmarks/trace_hashes.py [--seeds 2] --out after.json --against before.json

With ``--against`` it prints each run whose hash differs and exits 1 when any does (0 when all are
equal). ``--storage disk`` runs each schedule on real parquet in a scratch directory. Measures and
compares; it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402,F401  (sets sys.path to the project root)

from runtime.core.config import JobConfig  # noqa: E402
from runtime.protocols import PROTOCOLS  # noqa: E402
from runtime.sim.explore import run_seed  # noqa: E402
from runtime.sim.host import simulate  # noqa: E402
from runtime.sim.schedule import SCENARIOS  # noqa: E402


def hashes(seeds: int, storage: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for scenario in SCENARIOS:
        for protocol in PROTOCOLS:
            for seed in range(seeds):
                with tempfile.TemporaryDirectory(prefix="commitlab-hash-") as work:
                    r = run_seed(scenario, seed, protocol, storage=storage, workdir=work)
                out[f"{scenario}/{protocol}/{seed}"] = str(r["trace_sha256"])
    cfg = JobConfig(
        protocol="message-bus",
        source="generator",
        writers=16,
        checkpoints=50,
        records=16 * 50 * 10,
        partitions=1,
        buckets=16,
    )
    for seed in range(seeds):
        out[f"timed/{seed}"] = simulate(cfg, seed=seed, storage="memory", verify=False).sim.trace_sha256
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds per scenario x protocol (default 2)")
    ap.add_argument("--storage", choices=("memory", "disk"), default="memory")
    ap.add_argument("--out", required=True, help="where to write the hashes (JSON)")
    ap.add_argument("--against", default="", help="an earlier --out to compare with")
    args = ap.parse_args()
    t = time.perf_counter()
    now = hashes(args.seeds, args.storage)
    Path(args.out).write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    print(f"{len(now)} runs hashed in {time.perf_counter() - t:.0f} s -> {args.out}")
    if not args.against:
        return 0
    before = json.loads(Path(args.against).read_text())
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for k in differ:
        print(f"differs: {k}: {before.get(k, '(absent)')[:12]} -> {now.get(k, '(absent)')[:12]}")
    print(f"same trace bytes in {len(now) - len(differ)} of {len(before.keys() | now.keys())} runs")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
