"""A two-node Ray cluster of ``ray start --block`` processes, for the tests that deploy as
docs/CLUSTER.md does (``ray job submit``, token authentication).

Each node is a ``ray start --block`` process (terminating it stops that node's Ray processes, and
no other Ray on the machine: ``ray stop`` would also stop the test session's). The nodes have their
own ports and a temp dir of their own, so the session's Ray, and any other Ray cluster on this
machine, is not disturbed.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 90
AGENT_TIMEOUT_S = 45  # the agent binds within seconds of its raylet; past this, the start is tried again

# Ray's worker processes listen on 10002-19999 (``--min-worker-port``/``--max-worker-port``).
PORTS_FROM = 20000


def _ephemeral_start() -> int:
    """Where the kernel's ephemeral ports begin: every outgoing connection's local port is taken
    from there, so a port chosen in that range can be taken by a connection before Ray binds it."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n: int, taken: set[int]) -> list[int]:
    """``n`` ports free now, none in ``taken`` (added to it), from below the ephemeral range.

    Not ``bind(0)``: that hands out ephemeral ports, and on a loaded machine (the session's Ray
    and Spark hold hundreds of connections) one of them was taken by an outgoing connection in
    the seconds before a raylet bound it ("bind: Address already in use", the node never came up).
    """
    rng = random.Random()
    chosen: list[int] = []
    candidates = [p for p in range(PORTS_FROM, _ephemeral_start()) if p not in taken]
    for port in rng.sample(candidates, len(candidates)):
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        chosen.append(port)
        taken.add(port)
        if len(chosen) == n:
            return chosen
    raise ClusterStartError(f"fewer than {n} free ports between {PORTS_FROM} and {_ephemeral_start()}")


@dataclass
class LocalCluster:
    gcs: str  # host:port of the head's GCS
    dashboard: str  # http://host:port, where `ray job submit` goes
    nodes: list[subprocess.Popen[str]]
    logs: Path

    session_logs: Path  # the nodes' Ray logs (raylets, GCS, agents) under the head's temp dir
    env: dict[str, str] = field(default_factory=dict)  # what the nodes were started with (the token's too)
    headers: dict[str, str] = field(default_factory=dict)  # what a request to the dashboard carries

    def log_tail(self) -> str:
        """The ``ray start`` outputs' tails, then each Ray process log's error lines: a raylet that
        never registers says why in its own log, not in ``ray start``'s."""
        parts = [f"{p.name}:\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(self.logs.glob("*.log"))]
        for p in sorted(self.session_logs.glob("session_*/logs/*")):
            if p.suffix not in (".out", ".err", ".log") or not p.is_file():
                continue
            lines = p.read_text(errors="replace").splitlines()
            bad = [line for line in lines if " E " in line[:40] or " F " in line[:40] or "Error" in line]
            if bad or (p.suffix == ".err" and lines):
                parts.append(f"{p.name}:\n" + "\n".join((bad or lines)[-15:]))
        return "\n".join(parts)


def _node_ports(ip: str, taken: set[int]) -> list[str]:
    # every port a node opens, chosen free: a second node on the same machine must not collide
    # with the first (or with the test session's Ray) on the agents' fixed defaults
    ports = free_ports(5, taken)
    return [
        "--node-ip-address",
        ip,
        "--num-cpus",
        "1",
        "--dashboard-agent-listen-port",
        str(ports[0]),
        "--dashboard-agent-grpc-port",
        str(ports[1]),
        "--runtime-env-agent-port",
        str(ports[2]),
        "--metrics-export-port",
        str(ports[3]),
        "--node-manager-port",
        str(ports[4]),
        "--block",
        "--disable-usage-stats",
    ]


def ray_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without a Ray address or a Ray token, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    # `python` in the job's entrypoint and in `ray start` is this environment's interpreter
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] = "0"
    # the dashboard starts its modules in subprocesses and gives up on one after 30 s; on this
    # 2-core machine under load the head's `ray start` exited so ("Module MetricsHead failed to start")
    env.setdefault("RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT", "120")
    return {**env, **(extra or {})}


class ClusterStartError(RuntimeError):
    """The local cluster did not come up; the message has what was awaited and the nodes' logs."""


def _wait_for(what: str, check: Callable[[], bool], cluster: LocalCluster, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in cluster.nodes):
            raise ClusterStartError(f"a `ray start` process exited while waiting for {what}:\n{cluster.log_tail()}")
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise ClusterStartError(f"gave up after {timeout_s:.0f} s waiting for {what}:\n{cluster.log_tail()}")


def _accepts(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, port)) == 0


def _resolved_node_ip() -> str:
    """The address Ray gives a node started here (its dashboard agent registers it): the one a
    packet to the outside would leave from."""
    import ray.util

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def _alive_nodes(cluster: LocalCluster) -> int:
    request = urllib.request.Request(f"{cluster.dashboard}/nodes?view=summary", headers=cluster.headers)
    with urllib.request.urlopen(request, timeout=5) as r:
        doc = json.loads(r.read())
    summary = doc.get("data", {}).get("summary", [])
    return sum(1 for n in summary if n.get("raylet", {}).get("state") == "ALIVE")


def _start_cluster(
    tmp: Path, nodes: list[subprocess.Popen[str]], env: dict[str, str], headers: dict[str, str]
) -> LocalCluster:
    """A head node with the dashboard and one worker node, 1 CPU each, each a ``ray start``
    process appended to ``nodes`` as it starts (the caller stops them, also when this raises)."""
    taken: set[int] = set()
    gcs_port, dash_port = free_ports(2, taken)
    logs = tmp / "logs"
    logs.mkdir()
    head_cmd = [RAY, "start", "--head", "--port", str(gcs_port), "--temp-dir", str(tmp / "ray")]
    head_cmd += ["--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash_port)]
    head_cmd += ["--resources", json.dumps({"head-node": 1}), *_node_ports("127.0.0.1", taken)]
    cluster = LocalCluster(
        f"127.0.0.1:{gcs_port}", f"http://127.0.0.1:{dash_port}", nodes, logs, tmp / "ray", env, headers
    )

    def start(cmd: list[str], name: str) -> None:
        with open(logs / f"{name}.log", "w") as out:
            cluster.nodes.append(
                subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)
            )

    start(head_cmd, "head")
    # the head's `ray start` is done only once its raylet registered; the dashboard answers before
    _wait_for("the head node", lambda: _alive_nodes(cluster) == 1, cluster)
    # `ray job submit` goes through the head's job agent, which starts after its raylet: on a busy
    # machine a submission right after the node came up was refused ("Connect call failed"). The
    # dashboard reaches the agent at the address Ray resolved for the node (the machine's, not the
    # --node-ip-address 127.0.0.1 given), where the agent binds first and then 127.0.0.1: once a
    # submission was refused there three times while 127.0.0.1 answered, so both are waited for
    # (a start that does not get there is tried again on fresh ports)
    agent = int(head_cmd[head_cmd.index("--dashboard-agent-listen-port") + 1])
    for host in dict.fromkeys(["127.0.0.1", _resolved_node_ip()]):
        what = f"the head's job agent on {host}:{agent}"
        _wait_for(what, functools.partial(_accepts, host, agent), cluster, AGENT_TIMEOUT_S)
    worker_cmd = [RAY, "start", "--address", cluster.gcs, "--resources", json.dumps({"worker-node": 1})]
    start([*worker_cmd, *_node_ports("127.0.0.2", taken)], "worker")
    _wait_for("two alive nodes", lambda: _alive_nodes(cluster) == 2, cluster)
    return cluster


def _stop(nodes: list[subprocess.Popen[str]]) -> None:
    for p in reversed(nodes):  # `ray start --block` stops its node's processes on SIGTERM
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in reversed(nodes):
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


@contextmanager
def two_node_cluster(
    env: dict[str, str] | None = None, headers: dict[str, str] | None = None
) -> Iterator[LocalCluster]:
    """The two-node cluster, stopped on leaving; its nodes' environment is :func:`ray_env` plus
    ``env``, and ``headers`` go with every request to the dashboard. A raylet that does not
    register within Ray's own 30 s (``ray start`` then exits: "The current node timed out during
    startup") happens on this loaded 2-core machine now and then; the start is tried a second time
    on fresh ports before :class:`ClusterStartError` says why both failed."""
    failures: list[str] = []
    for _attempt in range(2):
        # a short temp dir: Ray's unix sockets live under it and their paths have a length limit
        tmp = Path(tempfile.mkdtemp(prefix="rjs-", dir="/tmp"))
        nodes: list[subprocess.Popen[str]] = []
        try:
            try:
                cluster = _start_cluster(tmp, nodes, ray_env(env), headers or {})
            except ClusterStartError as exc:
                failures.append(str(exc))
                continue
            yield cluster
            return
        finally:
            _stop(nodes)
            shutil.rmtree(tmp, ignore_errors=True)
    raise ClusterStartError("the local cluster did not start, twice:\n" + "\n---\n".join(failures))
