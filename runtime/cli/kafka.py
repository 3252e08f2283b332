"""``commitlab kafka``: a single-node Kafka broker on loopback, until Ctrl-C; and the broker a run
or a comparison starts for itself with ``--control-topic kafka``.

Both come before Ray or Spark start: a broker that cannot start or be reached is bad input (exit 2,
the message naming the option), never a job that fails later.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from runtime.cli.exits import ExitCode
from runtime.cli.options import CommandParser, add_config_option
from runtime.core.config import ConfigError, JobConfig
from runtime.kafka.address import START_BROKER, broker_address
from runtime.kafka.broker import DEFAULT_START_TIMEOUT_S

BROKER_TIMEOUT_FLAG = "--broker-timeout"


def add_broker_timeout(p: CommandParser) -> None:
    p.add_argument(
        BROKER_TIMEOUT_FLAG,
        type=float,
        default=DEFAULT_START_TIMEOUT_S,
        help="seconds a Kafka broker this command starts (--control-topic kafka) may take to serve "
        f"(default: {DEFAULT_START_TIMEOUT_S:g})",
    )


@contextmanager
def control_topic_for(cfg: JobConfig, console: Console, start_timeout_s: float) -> Iterator[JobConfig]:
    """``cfg`` with its control topic ready: ``kafka`` starts a broker on loopback for the ``with``
    (stopped after, whatever happens) and names it; a ``kafka://`` broker is checked (it answers,
    the control topic has one partition, created if missing); the model is left as it is."""
    from runtime.kafka.broker import running_broker
    from runtime.kafka.broker_client import ensure_control_topic

    if cfg.control_topic == START_BROKER:
        if start_timeout_s <= 0:
            raise ConfigError(f"{BROKER_TIMEOUT_FLAG} must be > 0, got {start_timeout_s:g}")
        console.print("starting a Kafka broker on 127.0.0.1 for the control topic (--control-topic kafka)")
        with running_broker(start_timeout_s=start_timeout_s) as broker:
            ensure_control_topic(broker.address, start_timeout_s)
            console.print(f"Kafka broker up: {broker.address}", highlight=False)
            yield cfg.replace(control_topic=str(broker.address))
        return
    address = broker_address(cfg.control_topic)
    if address is not None:
        ensure_control_topic(address, cfg.rpc_timeout_s if cfg.rpc_timeout_s > 0 else 10.0)
    yield cfg


def cmd_kafka(args: argparse.Namespace, console: Console) -> int:
    from runtime.kafka.broker import KafkaBroker, free_port
    from runtime.kafka.broker_client import ensure_control_topic

    if args.broker_timeout <= 0:
        raise ConfigError(f"{BROKER_TIMEOUT_FLAG} must be > 0, got {args.broker_timeout:g}")
    import os
    import shutil
    import tempfile

    data = args.data or tempfile.mkdtemp(prefix="commitlab-kafka-")
    os.makedirs(data, exist_ok=True)
    broker = KafkaBroker(args.port or free_port(), data, args.broker_timeout)
    console.print(f"starting Kafka on 127.0.0.1:{broker.port} (storage {data}; log {broker.log_path})", highlight=False)
    try:
        broker.start()
        ensure_control_topic(broker.address, args.broker_timeout)
        print(
            f"Kafka broker on {broker.address} until Ctrl-C; e.g. commitlab run --protocol control-topic "
            f"--control-topic kafka://127.0.0.1:{broker.port}",
            flush=True,
        )
        while broker.process is not None and broker.process.poll() is None:
            time.sleep(1.0)
        console.print(f"[red]the broker exited[/red]; its log: {broker.log_path}", highlight=False)
        return ExitCode.FAILED
    except KeyboardInterrupt:
        return ExitCode.OK
    finally:
        broker.stop()
        if not args.data:  # a temporary storage goes with the broker
            shutil.rmtree(data, ignore_errors=True)


def add_command(sub: Any) -> None:
    helptext = "serve a single-node Kafka broker (KRaft) on 127.0.0.1 for the control topic, until Ctrl-C"
    p: CommandParser = sub.add_parser("kafka", help=helptext, description=helptext)
    p.add_argument("--port", type=int, default=9092, help="port on 127.0.0.1 to listen on (default: 9092)")
    p.add_argument(
        "--data", default=None, help="the broker's storage folder, kept (default: a temporary folder, removed after)"
    )
    add_broker_timeout(p)
    add_config_option(p, job=False)
    p.set_defaults(func=cmd_kafka)
