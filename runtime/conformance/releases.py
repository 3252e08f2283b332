"""Which Hudi release runs for which protocol, where its harness is, and what stops one from running.

The harness (``conformance/``, a Maven project) is built once per release at set-up
(``scripts/setup.sh``): a jar per release under ``conformance/target/``. A Hudi Flink bundle runs
only with the Flink minor it was built for, so a release is a (Hudi bundle, Flink) pair. What the
package registry this project reaches serves decides which releases exist here (checked on
2026-11-25 and 2026-11-29): no Hudi 1.x Flink bundle at all; of 0.14/0.15 only
``hudi-flink1.17-bundle:0.14.0`` and ``hudi-flink1.15-bundle:0.14.1``; ``hudi-flink-bundle_2.11:0.10.1``
(not ``_2.12``), ``hudi-flink1.13-bundle:0.12.3`` and ``hudi-flink1.16-bundle:0.13.1``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from runtime.core.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
HARNESS_DIR = ROOT / "conformance"


class ConformanceUnavailable(UserError):
    """The real release cannot run here: no Java, no harness, or no release for the protocol."""


@dataclass(frozen=True)
class Release:
    """One Hudi release the harness runs: its Flink bundle and the Flink it runs on."""

    hudi: str
    flink: str
    bundle: str  # Maven coordinates of the Hudi Flink bundle
    table_version: int  # what the release writes (hoodie.table.version)

    @property
    def profile(self) -> str:
        return f"hudi-{self.hudi}"

    @property
    def jar(self) -> Path:
        return HARNESS_DIR / "target" / f"conformance-hudi-{self.hudi}.jar"


RELEASES = {
    "0.10.1": Release("0.10.1", "1.13.6", "org.apache.hudi:hudi-flink-bundle_2.11:0.10.1", 3),
    "0.12.3": Release("0.12.3", "1.13.6", "org.apache.hudi:hudi-flink1.13-bundle:0.12.3", 5),
    "0.13.1": Release("0.13.1", "1.16.3", "org.apache.hudi:hudi-flink1.16-bundle:0.13.1", 5),
    "0.14.0": Release("0.14.0", "1.17.2", "org.apache.hudi:hudi-flink1.17-bundle:0.14.0", 6),
    "0.14.1": Release("0.14.1", "1.15.4", "org.apache.hudi:hudi-flink1.15-bundle:0.14.1", 6),
}

# The release each protocol is checked against: the newest one that runs here of those the
# protocol models (docs/FIDELITY.md names each protocol's releases).
PROTOCOL_RELEASES = {
    "ckp-meta": "0.14.0",  # CkpMetadata on the DFS (0.11-0.15); 0.12.3, 0.13.1, 0.14.1 too (--release)
    "operator-event": "0.10.1",  # CommitAckEvent, writers reading the timeline (0.10)
}

# Why the other protocols have no real release here.
NOT_RUNNABLE = {
    "timeline-server": "TimelineBasedCkpMetadata (HUDI-6336): neither 0.14 bundle served here has it "
    "(both write ckp_meta files), and no 0.15 or 1.0 Flink bundle is served",
    "coordination-rpc": "Hudi 1.1's Flink writer: the registry serves no Hudi 1.x Flink bundle "
    "(org.apache.hudi:hudi-flink1.20-bundle, hudi-flink1.18-bundle at 1.0.x-1.2.x: not found)",
    "coordination-rpc-async": "an open pull request (#19960), never released",
    "message-bus": "a commit on Hudi's master (PR #3915) that no release shipped",
    "control-topic": "Hudi's Kafka Connect sink, not a Flink writer: the harness runs Flink",
}


def release_for(protocol: str, asked: str | None) -> Release:
    """The release to run for ``protocol`` (``asked``: ``--release``), or why there is none."""
    if asked:
        if asked not in RELEASES:
            raise ConformanceUnavailable(
                f"--release {asked}: the harness runs {', '.join(RELEASES)}; choose one of them"
            )
        return RELEASES[asked]
    if protocol in PROTOCOL_RELEASES:
        return RELEASES[PROTOCOL_RELEASES[protocol]]
    why = NOT_RUNNABLE.get(protocol, "a protocol of the lab's own, not a Hudi release")
    runnable = ", ".join(f"{p} (Hudi {r})" for p, r in PROTOCOL_RELEASES.items())
    raise ConformanceUnavailable(
        f"--protocol {protocol}: no real release runs here ({why}); conformance runs {runnable}, "
        "or name one with --release"
    )


def java_command() -> str:
    """The ``java`` to run the harness with: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if not found:
        raise ConformanceUnavailable(
            "conformance needs Java 17 to run Hudi's Flink writer, and 'java' was not found: "
            "install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"
        )
    return found


def check_built(release: Release) -> Path:
    """The release's harness jar, or how to build it."""
    if not release.jar.is_file():
        how = "scripts/setup.sh (it builds the harness when Maven is installed)"
        if not shutil.which("mvn"):
            how = "install Maven (Debian: apt-get install maven), then run scripts/setup.sh"
        raise ConformanceUnavailable(
            f"the conformance harness for Hudi {release.hudi} is not built ({os.path.relpath(release.jar, ROOT)} "
            f"is missing): run {how}, or build it alone with "
            f"mvn -q -f conformance/pom.xml -P {release.profile} package -DskipTests"
        )
    return release.jar
