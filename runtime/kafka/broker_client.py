"""The control topic on a real Kafka broker, through ``confluent-kafka`` (librdkafka).

Hudi's settings, from hudi-kafka-connect (``org.apache.hudi.connect.kafka``, Hudi 0.10 on):

- ``KafkaControlProducer.publishMessage``: a record whose key is the message type's name
  (``START_COMMIT``...) and whose value is the message's bytes, with the producer's defaults (the
  Java client's ``linger.ms`` 0 in the Kafka releases Hudi built against: librdkafka's 5 ms is set
  to 0 here). Hudi does not wait for the send; :meth:`BrokerPort.publish` waits for the delivery
  report, which gives the offset the model's publish returns, bounded by ``--rpc-timeout``
  (librdkafka's ``message.timeout.ms``: an undelivered message fails the producer, as the model's
  lost append does).
- ``KafkaConnectControlAgent.start``: one consumer per agent, in a consumer group of its own
  (``"hudi-control-group" + UUID``), ``auto.offset.reset=latest`` ("consumers only process
  messages that are sent after they come online"), polled every ``KAFKA_POLL_TIMEOUT_MS`` (100 ms),
  and ``commitSync`` after each poll's records are handed to their receivers. Here every role (the
  coordinator, each participant) has its own agent, so its own group
  ``hudi-control-group-<role>-<uuid>``, and a poll commits the offsets of what it returns.
- the control topic has one partition (Hudi's README creates it with ``--partitions 1``, so that
  every participant sees every message in the same order): :func:`ensure_control_topic` creates
  it so, and refuses one with more.
- many sinks may share one control topic, each message naming its sink's topic
  (``ControlMessage.topicName``, by which the agent routes it); here a header names the job (its
  table), and a consumer drops another job's records.

A deliberate difference, where a consumer starts: Hudi's ``subscribe`` resolves ``latest`` when the
group's join completes, some time after the agent starts; :meth:`BrokerConsumer.open` waits
(bounded) for the join and starts at the end the topic had when ``open`` began, so a message sent
after every role opened is never lost to a join still in progress. Only that first assignment is
moved: a later one (the group rejoined after its broker came back) resumes at the group's committed
offset, as Kafka's consumer does.

librdkafka's calls block, so each consumer and the producer run them on a thread of their own
(one thread per client: a client is used by one thread at a time). A broker that goes away is not
an error for the roles: librdkafka reconnects, and its transient errors are counted
(``control_topic_broker_errors``), not raised; only a fatal one is.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from runtime.core import codec, trace_events
from runtime.core.config import ConfigError, flag_of
from runtime.core.env import Env, WaitTimeout, waited_text
from runtime.kafka.address import FLAG, BrokerAddress
from runtime.kafka.port import ControlConsumer
from runtime.kafka.topic import ControlMessage, TopicRecord

T = TypeVar("T")
GROUP_PREFIX = "hudi-control-group"  # KafkaConnectControlAgent's group id, before its UUID
POLL_TIMEOUT_S = 0.1  # KafkaConnectControlAgent.KAFKA_POLL_TIMEOUT_MS
JOB_HEADER = "commitlab.job"  # which job a record belongs to (Hudi: ControlMessage.topicName)
RPC_FLAG = flag_of("rpc_timeout_s")


def _confluent() -> Any:
    try:
        import confluent_kafka
    except ImportError as exc:  # the pinned dependency is missing: an install problem, said plainly
        raise ConfigError(
            f"{FLAG} kafka://...: the Python package confluent-kafka is not installed (scripts/setup.sh installs it)"
        ) from exc
    return confluent_kafka


class _Thread:
    """One client's thread: librdkafka's blocking calls, run one at a time off the event loop.
    Started on first use and again after a shutdown (a message published after its role's agent
    stopped still goes out)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pool: ThreadPoolExecutor | None = None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def shutdown(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)


def ensure_control_topic(address: BrokerAddress, timeout_s: float) -> int:
    """Creates the control topic with one partition (replication 1) unless it exists; returns its
    partition count. Raises ConfigError when the broker does not answer within ``timeout_s`` or
    the topic has more than one partition (Hudi's protocol needs one total order)."""
    ck = _confluent()
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # re-exported from cimpl

    admin = AdminClient({"bootstrap.servers": address.bootstrap_servers, "socket.timeout.ms": int(timeout_s * 1000)})
    try:
        meta = admin.list_topics(timeout=timeout_s)
    except ck.KafkaException as exc:
        raise ConfigError(
            f"{FLAG} {address}: no Kafka broker answered at {address.bootstrap_servers} within {timeout_s:g}s "
            f"({exc.args[0].str() if exc.args else exc}); start one (commitlab kafka) or name another"
        ) from exc
    if address.topic not in meta.topics:
        futures = admin.create_topics([NewTopic(address.topic, num_partitions=1, replication_factor=1)])
        try:
            futures[address.topic].result(timeout_s)
        except ck.KafkaException as exc:
            if exc.args[0].code() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
                raise ConfigError(f"{FLAG} {address}: the control topic could not be created: {exc}") from exc
        meta = admin.list_topics(address.topic, timeout=timeout_s)
    partitions = len(meta.topics[address.topic].partitions)
    if partitions != 1:
        raise ConfigError(
            f"{FLAG} {address}: the control topic {address.topic!r} has {partitions} partitions; Hudi's protocol "
            "needs one (kafka-topics.sh --create --partitions 1), so that every participant sees every message "
            "in one order: name another topic (kafka://HOST:PORT/TOPIC)"
        )
    return partitions


def _count_error(env: Env, err: Any) -> None:
    env.metrics.count("control_topic_broker_errors")
    env.tracer.instant("kafka client error", cat=trace_events.TOPIC, args={"error": str(err)[:200]})


class BrokerConsumer:
    """One role's agent consumer (``KafkaConnectControlAgent``'s), in a group of its own."""

    def __init__(self, env: Env, name: str, address: BrokerAddress, job_key: str, timeout_s: float) -> None:
        self.env = env
        self.name = name
        self.address = address
        self.job_key = job_key.encode()
        self.timeout_s = timeout_s
        self.group = f"{GROUP_PREFIX}-{name}-{uuid.uuid4()}"
        self._thread = _Thread(f"kafka-{name}")
        self._consumer: Any = None
        self._early: list[Any] = []  # records a poll returned while the group join was completing
        self._start_at: int | None = None  # where the first assignment starts (None: assigned)
        self.position = -1
        self.other_jobs = 0  # records of another job on the same topic, dropped
        self.broker_errors = 0

    async def open(self) -> int:
        self.position = await self._thread.run(self._open)
        return self.position

    def _open(self) -> int:
        ck = _confluent()
        partition = ck.TopicPartition(self.address.topic, 0)
        consumer = ck.Consumer(
            {
                "bootstrap.servers": self.address.bootstrap_servers,
                "group.id": self.group,
                "auto.offset.reset": "latest",
                "enable.auto.commit": False,  # the agent commits itself, after handing records over
                "client.id": self.name,
                "error_cb": self._on_error,
            }
        )
        self._consumer = consumer
        _, end = consumer.get_watermark_offsets(partition, timeout=self.timeout_s, cached=False)
        self._start_at = int(end)
        consumer.subscribe([self.address.topic], on_assign=self._on_assign)
        deadline = time.monotonic() + self.timeout_s
        while self._start_at is not None:
            if time.monotonic() > deadline:
                raise WaitTimeout(
                    waited_text(self.name, self.timeout_s, f"its consumer group's join at {self.address}", RPC_FLAG)
                )
            msg = consumer.poll(POLL_TIMEOUT_S)
            if msg is not None and msg.error() is None:
                self._early.append(msg)
        return int(end)

    def _on_assign(self, consumer: Any, parts: list[Any]) -> None:
        """The first assignment starts at the end the topic had at open (see the module
        docstring); a later one (the group rejoined, e.g. after its coordinator's broker came
        back) sets no offset, so Kafka resumes at the group's committed offset, as Hudi's agent
        does: starting at open's end again would hand every message since then over twice."""
        if self._start_at is not None:
            for p in parts:
                p.offset = self._start_at
            self._start_at = None
        consumer.assign(parts)

    async def poll(self, max_records: int = 100, timeout_s: float = 0.0) -> list[TopicRecord]:
        records = await self._thread.run(self._poll, max_records, timeout_s)
        now = time.time()
        for rec in records:
            # produce-to-consume, on one machine's clock: the broker's CreateTime is the producer's
            self.env.metrics.sample("control_topic.delivery_s", max(0.0, now - rec.appended_at))
        return records

    def _poll(self, max_records: int, timeout_s: float) -> list[TopicRecord]:
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError(f"{self.name}: poll before open")
        msgs, self._early = self._early, []
        if not msgs:
            first = consumer.poll(max(timeout_s, 0.0))
            msgs = [first] if first is not None else []
        if msgs and len(msgs) < max_records:
            msgs += consumer.consume(num_messages=max_records - len(msgs), timeout=0)
        records = [r for r in map(self._record, msgs) if r is not None]
        if msgs and any(m.error() is None for m in msgs):
            self._commit_sync()
        return records

    def _on_error(self, err: Any) -> None:
        """librdkafka's error callback (on this client's thread, inside a poll): a broker gone or
        unreachable. Counted; librdkafka reconnects by itself."""
        self.broker_errors += 1
        _count_error(self.env, err)

    def _record(self, msg: Any) -> TopicRecord | None:
        err = msg.error()
        if err is not None:
            if err.fatal():
                raise RuntimeError(f"{self.name}: the Kafka consumer failed at {self.address}: {err.str()}")
            self._on_error(err)
            return None
        self.position = msg.offset() + 1
        headers = dict(msg.headers() or [])
        if headers.get(JOB_HEADER) != self.job_key:
            self.other_jobs += 1
            return None
        message = codec.decode(msg.value(), ControlMessage)
        _, ts = msg.timestamp()
        return TopicRecord(offset=msg.offset(), message=message, appended_at=ts / 1000.0)

    def _commit_sync(self) -> None:
        """The agent's ``commitSync`` after a poll; a failed commit is logged there, counted here."""
        ck = _confluent()
        try:
            self._consumer.commit(asynchronous=False)
        except ck.KafkaException:
            self.env.metrics.count("control_topic_commit_errors")

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await self._thread.run(consumer.close)  # leaves the group
        self._thread.shutdown()


class BrokerPort:
    """The control topic on a broker: a producer, and a consumer per role that asks."""

    def __init__(self, env: Env, address: BrokerAddress, *, job_key: str, timeout_s: float) -> None:
        self.env = env
        self.address = address
        self.job_key = job_key
        self.timeout_s = timeout_s
        self._thread = _Thread(f"kafka-producer-{env.role}")
        self._producer: Any = None

    def consumer(self, name: str) -> ControlConsumer:
        return BrokerConsumer(self.env, name, self.address, self.job_key, self.timeout_s)

    async def publish(self, message: ControlMessage) -> int:
        started = time.perf_counter()
        offset = await self._thread.run(self._produce, message)
        self.env.metrics.sample("control_topic.publish_s", time.perf_counter() - started)
        self.env.tracer.instant(
            "topic.append", cat=trace_events.TOPIC, args={"kind": message.kind, "offset": offset, "broker": True}
        )
        return offset

    def _produce(self, message: ControlMessage) -> int:
        ck = _confluent()
        if self._producer is None:
            self._producer = ck.Producer(
                {
                    "bootstrap.servers": self.address.bootstrap_servers,
                    "linger.ms": 0,
                    "message.timeout.ms": max(1, int(self.timeout_s * 1000)),
                    "client.id": f"{self.env.role}-producer",
                    "error_cb": lambda err: _count_error(self.env, err),
                }
            )
        report: list[Any] = []
        self._producer.produce(
            self.address.topic,
            key=message.kind.encode(),
            value=codec.encode(message),
            headers=[(JOB_HEADER, self.job_key.encode())],
            on_delivery=lambda err, msg: report.append((err, msg)),
        )
        self._producer.flush(self.timeout_s)
        if not report:
            what = f"the broker at {self.address} to take {message.kind}"
            raise WaitTimeout(waited_text(self.env.role, self.timeout_s, what, RPC_FLAG))
        err, msg = report[0]
        if err is not None:
            raise RuntimeError(f"{self.env.role}: {message.kind} was not delivered to {self.address}: {err.str()}")
        return int(msg.offset())

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await self._thread.run(producer.flush, self.timeout_s)
        self._thread.shutdown()
