"""A single-node Kafka broker on loopback, from the jars the set-up fetched (``commitlab kafka``).

Apache Kafka 4.1 (``org.apache.kafka:kafka_2.13``; ``kafka-broker/pom.xml``, copied into
``kafka-broker/target/libs`` by ``scripts/setup.sh`` with Maven: nothing downloads at run time) in
KRaft mode, no ZooKeeper: one process is both the broker and its controller, as Kafka's
``config/server.properties`` for a combined node has it. Every listener is bound to 127.0.0.1.
Settings that differ from Kafka's defaults, and why: replication factors of the internal topics
1 (one node); ``group.initial.rebalance.delay.ms`` 0 (a new consumer group joins at once, not 3 s
later; Kafka's own config for a development node does the same); ``auto.create.topics.enable``
false (the control topic is created with one partition on purpose:
:func:`runtime.kafka.broker_client.ensure_control_topic`).

The storage is formatted (``kafka.tools.StorageTool format``) before the first start; a broker
restarted on the same directory (the ``broker.restarted_mid_commit`` fault) keeps its log and its
committed offsets. Every wait is bounded and names the option that sets it.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runtime.core.errors import UserError
from runtime.kafka.address import BrokerAddress

KAFKA_VERSION = "4.1.0"  # kafka-broker/pom.xml's kafka.version
LIBS_ENV = "COMMITLAB_KAFKA_LIBS"  # another folder of the broker's jars
DEFAULT_START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
HEAP = "-Xmx384m"  # a control topic's traffic is small; the machine is shared
STARTED = "Kafka Server started"  # KafkaRaftServer's line once it serves


class BrokerError(UserError):
    """The broker cannot start here (Java or its jars missing, a port taken, a start that timed out)."""

    heading = "Kafka broker"


def libs_dir() -> Path:
    """Where the broker's jars are: ``$COMMITLAB_KAFKA_LIBS``, or the repository's
    ``kafka-broker/target/libs``."""
    given = os.environ.get(LIBS_ENV)
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[2] / "kafka-broker" / "target" / "libs"


def missing_requirement() -> str | None:
    """Why a broker cannot start on this machine (Java or the jars missing), or None."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return (
            "Java is missing: the Kafka broker runs on Java 17 or newer "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless; scripts/setup.sh installs it as root)"
        )
    libs = libs_dir()
    if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        return (
            f"the Kafka broker's jars are not in {libs}: run scripts/setup.sh with Maven installed "
            f"(apt-get install maven), which fetches kafka_2.13 {KAFKA_VERSION} once, or set {LIBS_ENV}"
        )
    return None


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.isfile(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java") or "java"


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def cluster_id() -> str:
    """A new cluster id, as Kafka's ``org.apache.kafka.common.Uuid.randomUuid`` draws one: 16
    random bytes in URL-safe base64 without padding, drawn again while the text starts with "-".

    An id that starts with "-" reads as an option to ``kafka-storage format`` ("argument
    --cluster-id/-t: expected one argument"), one format in 64.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _properties(port: int, controller_port: int, data_dir: str) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={data_dir}",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "num.partitions=1",
            "auto.create.topics.enable=false",
            "",
        ]
    )


@dataclass
class KafkaBroker:
    """One broker process: :meth:`start`, :meth:`stop`, :meth:`restart` (same storage)."""

    port: int
    data_dir: str
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    timeout_flag: str = "--broker-timeout"
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.controller_port = free_port()
        self.log_path = os.path.join(self.data_dir, "broker.log")

    @property
    def address(self) -> BrokerAddress:
        return BrokerAddress("127.0.0.1", self.port)

    def start(self) -> BrokerAddress:
        """Formats the storage (first start only), starts the process and waits for it to serve."""
        why = missing_requirement()
        if why:
            raise BrokerError(why)
        if _port_taken(self.port):
            raise BrokerError(f"port {self.port} on 127.0.0.1 is taken: choose another with --port")
        logs = os.path.join(self.data_dir, "log")
        props = os.path.join(self.data_dir, "server.properties")
        with open(props, "w") as f:
            f.write(_properties(self.port, self.controller_port, logs))
        if not os.path.exists(os.path.join(logs, "meta.properties")):
            self._format(props)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [_java(), HEAP, "-cp", str(libs_dir() / "*"), "kafka.Kafka", props],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C in the terminal reaches the command, which stops it
            )
        self._wait_serving()
        return self.address

    def _format(self, props: str) -> None:
        tool = [_java(), "-cp", str(libs_dir() / "*"), "kafka.tools.StorageTool"]
        cmd = [*tool, "format", f"--cluster-id={cluster_id()}", "-c", props]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=self.start_timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(
                f"formatting the broker's storage took over {self.start_timeout_s:g}s ({self.timeout_flag})"
            ) from exc
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise BrokerError(f"formatting the broker's storage failed: {' / '.join(tail)}")

    def _wait_serving(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise BrokerError(
                    f"the broker exited with status {self.process.returncode} while starting; its log: {self.log_path}"
                )
            if _port_taken(self.port) and STARTED in self._log_tail():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(
                    f"the broker was not serving on 127.0.0.1:{self.port} within {self.start_timeout_s:g}s "
                    f"({self.timeout_flag} sets the wait; its log: {self.log_path})"
                )
            time.sleep(0.2)

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 65536))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Stops the process (SIGTERM, Kafka's controlled shutdown; SIGKILL after STOP_TIMEOUT_S)."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)

    def restart(self, down_s: float = 0.0) -> None:
        """Stops the broker, stays down ``down_s`` seconds, starts it again on the same storage."""
        self.stop()
        time.sleep(down_s)
        with open(self.log_path, "ab") as log:
            log.write(b"\n--- restarted ---\n")
        self._truncate_started_marker()
        self.start()

    def _truncate_started_marker(self) -> None:
        """A restart waits for a new STARTED line: the old log moves aside."""
        if os.path.exists(self.log_path):
            os.replace(self.log_path, self.log_path + ".1")


@contextmanager
def running_broker(
    port: int | None = None, data_dir: str | None = None, start_timeout_s: float = DEFAULT_START_TIMEOUT_S
) -> Iterator[KafkaBroker]:
    """A broker for the duration of a ``with``: started (bounded), stopped after, whatever happens.
    Without ``data_dir`` its storage is a temporary directory, removed after."""
    owned = data_dir is None
    folder = tempfile.mkdtemp(prefix="commitlab-kafka-") if data_dir is None else data_dir
    os.makedirs(folder, exist_ok=True)
    broker = KafkaBroker(port or free_port(), folder, start_timeout_s)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        if owned:
            shutil.rmtree(folder, ignore_errors=True)
