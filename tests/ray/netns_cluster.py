"""Ray nodes in Linux network namespaces: a head and workers, each in a namespace of its own with
its own address on a private bridge, so that traffic between nodes can be cut (a partition) or
delayed (``tc netem``) while every process stays alive.

Layout: a bridge ``<prefix>br`` in the root namespace; per node a namespace ``<prefix>n<i>`` and a
veth pair, ``<prefix>h<i>`` on the bridge and ``<prefix>p<i>`` in the namespace with the address
``10.<a>.<b>.<i+2>/24``. A partition sets the bridge side down (both directions, the node's processes
untouched); a slow link puts ``netem delay`` on both ends of the node's veth, or ``tbf rate`` where
the kernel has no netem (:meth:`NetnsCluster.slow`).

Every Ray process of a node runs inside its namespace (started by ``ip netns exec``), so
``ip netns pids`` names exactly the processes this helper started: stopping a node kills those and
nothing else, never another Ray on the machine. The nodes share one filesystem (a network namespace
does not change mounts), which is the storage every node sees, as on a cluster with a shared DFS.
The workers start one at a time: Ray names a node's sockets and logs in the head's session
directory by taking the first free name, and two nodes starting at once took the same one
("bind: Address already in use", the raylet aborted).

:func:`netns_unavailable` says why namespaces cannot be made here (not root, no ``ip``), for a
skip; :func:`netns_cluster` removes the namespaces, the bridge, the veths and the processes
whatever happens.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
GCS_PORT = 6379  # each namespace has its own ports: Ray's defaults collide with nothing
NODE_START_TIMEOUT_S = 120

# Ray's node-death timeout, shortened for the tests: the GCS health-checks each raylet every
# period and marks the node dead after `failure_threshold` checks in a row fail or time out
# (Ray 2.52 ray_config_def.h: health_check_period_ms 3000, health_check_timeout_ms 10000,
# health_check_failure_threshold 5: 15-50 s). Here about 3 s.
NODE_DEATH_CONFIG = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "6",
}
NODE_DEATH_S = 500 * 6 / 1000


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None when they can (a probe is made and removed)."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) on PATH"
    if shutil.which("tc") is None:
        return "no `tc` command (iproute2) on PATH"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN); the test runs as an ordinary user"
    probe = f"rnprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Node:
    name: str  # head, worker-1, ...
    netns: str
    ip: str
    host_veth: str  # the bridge's end of the node's link
    ns_veth: str
    log: Path
    proc: subprocess.Popen[str] | None = None

    def exec(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *cmd]

    def pids(self) -> list[int]:
        out = _ip("netns", "pids", self.netns, check=False).stdout.split()
        return [int(p) for p in out if p.isdigit()]


@dataclass
class NetnsCluster:
    prefix: str
    bridge: str
    nodes: list[Node]
    tmp: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return self.nodes[1:]

    @property
    def address(self) -> str:
        return f"{self.head.ip}:{GCS_PORT}"

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    # --- Ray ---------------------------------------------------------------------------------

    def start_node(self, node: Node) -> None:
        """``ray start --block`` inside the node's namespace; returns once the node says it is up."""
        cmd = [RAY, "start", "--node-ip-address", node.ip, "--num-cpus", "1", "--disable-usage-stats", "--block"]
        cmd += ["--resources", f'{{"{node.name}": 1}}']
        if node is self.head:
            cmd += ["--head", "--port", str(GCS_PORT), "--include-dashboard", "false"]
            cmd += ["--temp-dir", str(self.tmp / "ray")]
        else:
            cmd += ["--address", self.address]
        seen = node.log.stat().st_size if node.log.exists() else 0  # a restarted node appends to its log
        with open(node.log, "a") as out:
            node.proc = subprocess.Popen(
                node.exec(cmd), env=self.env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True
            )
        deadline = time.monotonic() + NODE_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if b"This command will now block forever" in node.log.read_bytes()[seen:]:
                return
            if node.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"{node.name} ({node.ip}) did not start within {NODE_START_TIMEOUT_S} s:\n{self.log_tail()}")

    def stop_node(self, node: Node, sig: int = signal.SIGKILL) -> None:
        """Kill every process in the node's namespace (they are all this helper's) and wait for them."""
        for attempt_sig in (sig, signal.SIGKILL):
            for pid in node.pids():
                try:
                    os.kill(pid, attempt_sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 15
            while node.pids() and time.monotonic() < deadline:
                time.sleep(0.2)
            if not node.pids():
                break
        if node.proc is not None:
            try:
                node.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def python(self, node: Node, args: list[str], **popen: object) -> subprocess.Popen[str]:
        """This interpreter inside the node's namespace (a driver there is attached to its raylet)."""
        return subprocess.Popen(node.exec([sys.executable, *args]), env=self.env, text=True, **popen)  # type: ignore[call-overload]

    def log_tail(self) -> str:
        parts = [f"{n.name}:\n{n.log.read_text(errors='replace')[-1500:]}" for n in self.nodes if n.log.exists()]
        return "\n".join(parts)

    # --- the network ---------------------------------------------------------------------------

    def partition(self, node: Node) -> None:
        _ip("link", "set", node.host_veth, "down")

    def heal(self, node: Node) -> None:
        _ip("link", "set", node.host_veth, "up")

    def slow(self, node: Node, one_way_ms: float, rate: str) -> str:
        """Slow both ends of the node's link: ``netem delay one_way_ms`` (a round trip to the node
        takes 2 x one_way_ms more) where the kernel has netem (``sch_netem``), else ``tbf rate``
        (every packet queues behind the ones before it at that rate). Returns which, for the record."""
        for qdisc in (["netem", "delay", f"{one_way_ms}ms"], ["tbf", "rate", rate, "burst", "16kb", "latency", "2s"]):
            done = [self._qdisc(node, inside, ["replace", "root", *qdisc]) for inside in (False, True)]
            if all(d.returncode == 0 for d in done):
                return " ".join(qdisc)
            self.unslow(node)
            if "unknown" not in "".join(d.stderr for d in done):
                raise RuntimeError(
                    f"tc {' '.join(qdisc)} failed on {node.name}'s link: {done[0].stderr}{done[1].stderr}"
                )
        raise RuntimeError(f"neither netem nor tbf is available for {node.name}'s link (tc: unknown qdisc kind)")

    def unslow(self, node: Node) -> None:
        for inside in (False, True):
            self._qdisc(node, inside, ["del", "root"])

    def _qdisc(self, node: Node, inside: bool, args: list[str]) -> subprocess.CompletedProcess[str]:
        dev = node.ns_veth if inside else node.host_veth
        cmd = ["tc", "qdisc", args[0], "dev", dev, *args[1:]]
        return subprocess.run(node.exec(cmd) if inside else cmd, capture_output=True, text=True, timeout=30)


def _subnet() -> tuple[int, int]:
    return 200 + random.randrange(50), random.randrange(1, 255)


@contextmanager
def netns_cluster(workers: int = 2, env: dict[str, str] | None = None) -> Iterator[NetnsCluster]:
    """A head and ``workers`` worker nodes, 1 CPU each, each in its own namespace on a private
    bridge, with :data:`NODE_DEATH_CONFIG` (plus ``env``) in every node's environment. Removed on
    leaving, whatever happened: the processes in the namespaces, the namespaces (and with them the
    veths), the bridge, the temp dir."""
    prefix = f"rn{os.getpid() % 100000}"
    a, b = _subnet()
    tmp = Path(tempfile.mkdtemp(prefix="rnns-", dir="/tmp"))  # short: Ray's socket paths are limited
    node_env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    node_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{node_env.get('PATH', '')}"
    node_env.update({"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", **NODE_DEATH_CONFIG, **(env or {})})
    nodes = [
        Node(
            "head" if i == 0 else f"worker-{i}",
            f"{prefix}n{i}",
            f"10.{a}.{b}.{i + 2}",
            f"{prefix}h{i}",
            f"{prefix}p{i}",
            tmp / f"node-{i}.log",
        )
        for i in range(workers + 1)
    ]
    cluster = NetnsCluster(prefix, f"{prefix}br", nodes, tmp, node_env)
    try:
        _ip("link", "add", cluster.bridge, "type", "bridge")
        _ip("link", "set", cluster.bridge, "up")
        for n in nodes:
            _ip("netns", "add", n.netns)
            _ip("link", "add", n.host_veth, "type", "veth", "peer", "name", n.ns_veth)
            _ip("link", "set", n.ns_veth, "netns", n.netns)
            _ip("link", "set", n.host_veth, "master", cluster.bridge)
            _ip("link", "set", n.host_veth, "up")
            _ip("-n", n.netns, "link", "set", "lo", "up")
            _ip("-n", n.netns, "addr", "add", f"{n.ip}/24", "dev", n.ns_veth)
            _ip("-n", n.netns, "link", "set", n.ns_veth, "up")
        for n in nodes:  # one at a time (the module's docstring says why)
            cluster.start_node(n)
        yield cluster
    finally:
        for n in reversed(nodes):
            if _ip("netns", "pids", n.netns, check=False).returncode == 0:
                cluster.stop_node(n)
            _ip("netns", "del", n.netns, check=False)
            _ip("link", "del", n.host_veth, check=False)  # gone with the namespace; a half-made one is not
        _ip("link", "del", cluster.bridge, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
