"""``--control-topic``: the model by default, a broker by address, refused where it cannot run,
all before Ray or a broker starts (exit 2, the flag named)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runtime.core.config import ConfigError, JobConfig
from runtime.kafka.address import HUDI_CONTROL_TOPIC, BrokerAddress, broker_address
from runtime.kafka.broker import LIBS_ENV, missing_requirement
from runtime.kafka.control_topic_ports import control_topic_port
from runtime.kafka.port import ModelPort
from runtime.sim import simulate


def test_the_default_is_the_model():
    assert JobConfig().control_topic == "model"
    assert broker_address("model") is None


def test_a_broker_address_names_host_port_and_topic():
    assert broker_address("kafka://127.0.0.1:9092") == BrokerAddress("127.0.0.1", 9092, HUDI_CONTROL_TOPIC)
    address = broker_address("kafka://localhost:19092/my-control")
    assert address == BrokerAddress("localhost", 19092, "my-control")
    assert address.bootstrap_servers == "localhost:19092"
    assert str(address) == "kafka://localhost:19092/my-control"


@pytest.mark.parametrize("value", ["kafka://127.0.0.1", "http://127.0.0.1:9092", "kafka://h:0", "kafka://h:99999", "x"])
def test_a_malformed_value_is_refused_naming_the_flag(value):
    with pytest.raises(ConfigError, match="--control-topic"):
        broker_address(value)


def test_kafka_alone_is_for_a_command_to_resolve():
    with pytest.raises(ConfigError, match="only a command can start a broker"):
        broker_address("kafka")


def test_the_model_port_is_the_default_port():
    class _Env:
        role = "writer-0"

    port = control_topic_port(_Env(), JobConfig(), "/t")  # type: ignore[arg-type]
    assert isinstance(port, ModelPort)


def test_the_simulator_keeps_the_model(tmp_path):
    cfg = JobConfig(protocol="control-topic", source="generator", control_topic="kafka://127.0.0.1:9092")
    with pytest.raises(ConfigError, match="the simulator runs the control topic's model only"):
        simulate(cfg, seed=1, storage="memory")


def test_the_consumer_fault_applies_to_the_control_topic_only(tmp_path):
    from runtime.core.fault_spec import parse_faults
    from runtime.job.prepare import prepare_job

    cfg = JobConfig(protocol="message-bus", table=str(tmp_path / "t"))
    with pytest.raises(ConfigError, match="has no control topic"):
        prepare_job(cfg.replace(faults=parse_faults("control_topic.consumer_restarted@2#0")))


def _commitlab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def test_run_refuses_a_broker_for_another_protocol_before_ray_starts(tmp_path):
    done = _commitlab(
        "run", "--protocol", "message-bus", "--control-topic", "kafka://127.0.0.1:9", "--out", str(tmp_path)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--protocol control-topic" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_run_with_an_unreachable_broker_exits_2_naming_it(tmp_path):
    done = _commitlab(
        "run",
        "--protocol",
        "control-topic",
        "--source",
        "generator",
        "--control-topic",
        "kafka://127.0.0.1:9",  # nothing listens on the discard port
        "--rpc-timeout",
        "2",
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no Kafka broker answered at 127.0.0.1:9" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_without_the_jars_the_broker_says_how_to_get_them(tmp_path):
    done = _commitlab("kafka", "--port", "19999", env={LIBS_ENV: str(tmp_path / "none")})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "scripts/setup.sh" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_without_java_the_broker_exits_2_saying_so(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    assert "Java is missing" in (missing_requirement() or "")
    done = _commitlab("kafka", "--port", "19999", env={"PATH": str(tmp_path)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Java is missing" in done.stdout and "Traceback" not in done.stdout + done.stderr
