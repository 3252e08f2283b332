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

librdkafka's calls block, so each client runs them on a thread of its own
(:class:`runtime.kafka.client_thread.ClientThread`: one thread per client, every call bounded). A
broker that goes away is not an error for the roles: librdkafka reconnects, and its transient errors
are counted (``control_topic_broker_errors``), not raised; only a fatal one is.

A deliberate difference, a client replaced: Kafka's Java client (Hudi's) ignores a metadata
response that lists no broker (``NetworkClient.DefaultMetadataUpdater.handleSuccessfulResponse``:
"When talking to the startup phase of a broker, it is possible to receive an empty metadata set,
which we should retry later") and re-bootstraps when no known broker is reachable. librdkafka
(confluent-kafka 2.16) drops every broker such a response leaves out
(``rd_kafka_metadata_decommission_unavailable_brokers``); a KRaft broker in controlled shutdown
sends one, and when the client had already seen that broker's connection close, no re-bootstrap
starts (librdkafka issue #5301): the client knows no broker for good, its polls return nothing and
its synchronous commit never returns. On a loaded machine a broker restart does this to a client
now and then. So every client call is bounded (``--rpc-timeout``), and a consumer whose call did
not return, or that received nothing for ``--rpc-timeout`` while the topic was ahead of it or its
end could not be read (its end is read once a second while polls return nothing), is replaced: the
old client is abandoned, a new one joins a new group (as Hudi's agent does when it starts) and
starts at the position after the last record handed over, so nothing is lost or handed over twice;
counted (``control_topic_consumer_replaced``) and traced (``kafka consumer replaced``). A producer
whose message was not delivered is replaced the same way, its queue purged first so that the
message cannot arrive later (``control_topic_producer_replaced``).
"""

from __future__ import annotations

import functools
import time
import uuid
from typing import Any

from runtime.core import codec, trace_events
from runtime.core.config import ConfigError, flag_of
from runtime.core.env import Env, WaitTimeout, waited_text
from runtime.kafka.address import FLAG, BrokerAddress
from runtime.kafka.client_thread import ClientStuck, ClientThread
from runtime.kafka.port import ControlConsumer
from runtime.kafka.topic import ControlMessage, TopicRecord

GROUP_PREFIX = "hudi-control-group"  # KafkaConnectControlAgent's group id, before its UUID
POLL_TIMEOUT_S = 0.1  # KafkaConnectControlAgent.KAFKA_POLL_TIMEOUT_MS
JOB_HEADER = "commitlab.job"  # which job a record belongs to (Hudi: ControlMessage.topicName)
RPC_FLAG = flag_of("rpc_timeout_s")
PROBE_EVERY_S = 1.0  # a consumer whose polls return nothing reads the topic's end this often


def _confluent() -> Any:
    try:
        import confluent_kafka
    except ImportError as exc:  # the pinned dependency is missing: an install problem, said plainly
        raise ConfigError(
            f"{FLAG} kafka://...: the Python package confluent-kafka is not installed (scripts/setup.sh installs it)"
        ) from exc
    return confluent_kafka


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
    partitions = _partitions_listed(admin, address, meta, timeout_s)
    if partitions == 0:
        raise ConfigError(
            f"{FLAG} {address}: the broker listed the control topic {address.topic!r} with no partition for "
            f"{timeout_s:g}s (its partition has no leader yet); check the broker's log, or wait longer with "
            f"{RPC_FLAG} (a broker of yours) or --broker-timeout (one commitlab starts)"
        )
    if partitions != 1:
        raise ConfigError(
            f"{FLAG} {address}: the control topic {address.topic!r} has {partitions} partitions; Hudi's protocol "
            "needs one (kafka-topics.sh --create --partitions 1), so that every participant sees every message "
            "in one order: name another topic (kafka://HOST:PORT/TOPIC)"
        )
    return partitions


def _partitions_listed(admin: Any, address: BrokerAddress, meta: Any, timeout_s: float) -> int:
    """How many partitions the broker lists for the topic. A topic just created (here or by a
    process beside this one) is listed with none until its partition's leader is elected, a
    moment later or seconds on a loaded machine: the broker is asked again until it lists one or
    ``timeout_s`` has passed (0 then)."""
    deadline = time.monotonic() + timeout_s
    while True:
        topic = meta.topics.get(address.topic)
        listed = len(topic.partitions) if topic is not None else 0
        left = deadline - time.monotonic()
        if listed or left <= 0:
            return listed
        time.sleep(min(0.1, left))
        try:
            meta = admin.list_topics(address.topic, timeout=max(0.1, deadline - time.monotonic()))
        except _confluent().KafkaException:
            pass  # not answered within what is left: the loop's deadline says whether to ask again


def _count_error(env: Env, err: Any) -> None:
    env.metrics.count("control_topic_broker_errors")
    env.tracer.instant("kafka client error", cat=trace_events.TOPIC, args={"error": str(err)[:200]})


class _Client:
    """One librdkafka consumer in one group, on its own thread; replaced whole, never repaired."""

    def __init__(self, consumer: Any, thread: ClientThread, group: str, start_at: int) -> None:
        self.consumer = consumer
        self.thread = thread
        self.group = group
        self.start_at = start_at  # where its first assignment starts
        self.assigned = False
        self.early: list[Any] = []  # records a poll returned while the group join was completing


class BrokerConsumer:
    """One role's agent consumer (``KafkaConnectControlAgent``'s), in a group of its own; replaced
    when it stops reaching the topic (see the module docstring)."""

    def __init__(self, env: Env, name: str, address: BrokerAddress, job_key: str, timeout_s: float) -> None:
        self.env = env
        self.name = name
        self.address = address
        self.job_key = job_key.encode()
        self.timeout_s = timeout_s
        self.group = ""  # the current client's
        self._client: _Client | None = None
        self._opened = False
        self.position = -1  # the offset after the last record handed over
        self._heard_at = 0.0  # when the client last showed it reaches the topic (monotonic)
        self._probed_at = 0.0
        self.other_jobs = 0  # records of another job on the same topic, dropped
        self.broker_errors = 0
        self.replaced = 0

    async def open(self) -> int:
        self.position = await self._open_client(None)
        self._opened = True
        return self.position

    async def _open_client(self, start_at: int | None) -> int:
        """A new client in a new group, its first assignment at ``start_at`` (None: the topic's
        end now), once its join completed (bounded); returns where it starts."""
        thread = ClientThread(f"kafka-{self.name}")
        what = f"its consumer group's join at {self.address}"
        try:  # _join bounds the end's query and the join; the margin is the thread's
            client = await thread.run(
                self._join, thread, start_at, timeout_s=2 * self.timeout_s + 1.0, what=what, option=RPC_FLAG
            )
        except BaseException:
            thread.shutdown()
            raise
        self._client = client
        self.group = client.group
        self._heard_at = self._probed_at = time.monotonic()
        return client.start_at

    def _join(self, thread: ClientThread, start_at: int | None) -> _Client:
        ck = _confluent()
        group = f"{GROUP_PREFIX}-{self.name}-{uuid.uuid4()}"
        consumer = ck.Consumer(
            {
                "bootstrap.servers": self.address.bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "latest",
                "enable.auto.commit": False,  # the agent commits itself, after handing records over
                "client.id": self.name,
                "error_cb": self._on_error,
            }
        )
        try:
            if start_at is None:
                _, start_at = consumer.get_watermark_offsets(self._partition(), timeout=self.timeout_s, cached=False)
            client = _Client(consumer, thread, group, int(start_at))
            consumer.subscribe([self.address.topic], on_assign=functools.partial(self._on_assign, client))
            deadline = time.monotonic() + self.timeout_s
            while not client.assigned:
                if time.monotonic() > deadline:
                    raise WaitTimeout(
                        waited_text(self.name, self.timeout_s, f"its consumer group's join at {self.address}", RPC_FLAG)
                    )
                msg = consumer.poll(POLL_TIMEOUT_S)
                if msg is not None and msg.error() is None:
                    client.early.append(msg)
        except BaseException:
            consumer.close()
            raise
        return client

    def _partition(self) -> Any:
        return _confluent().TopicPartition(self.address.topic, 0)

    def _on_assign(self, client: _Client, consumer: Any, parts: list[Any]) -> None:
        """The client's first assignment starts where the client was opened to start (the end the
        topic had at open, or the replaced client's position); a later one (the group rejoined,
        e.g. after its coordinator's broker came back) sets no offset, so Kafka resumes at the
        group's committed offset, as Hudi's agent does: starting at the first start again would
        hand every message since then over twice."""
        if not client.assigned:
            for p in parts:
                p.offset = client.start_at
            client.assigned = True
        consumer.assign(parts)

    async def poll(self, max_records: int = 100, timeout_s: float = 0.0) -> list[TopicRecord]:
        if not self._opened:
            raise RuntimeError(f"{self.name}: poll before open")
        client = self._client or await self._reopen()
        if client is None:
            return []
        try:
            msgs = await client.thread.run(
                self._fetch,
                client,
                max_records,
                timeout_s,
                timeout_s=timeout_s + self.timeout_s,
                what=f"a poll of {self.address.topic} at {self.address}",
                option=RPC_FLAG,
            )
        except ClientStuck as exc:
            self._replace(client, str(exc))
            return []
        records = [r for r in map(self._record, msgs) if r is not None]
        if any(m.error() is None for m in msgs):
            self._heard_at = time.monotonic()
            try:
                await client.thread.run(
                    self._commit_sync, client, timeout_s=self.timeout_s, what="its offset commit", option=RPC_FLAG
                )
            except ClientStuck as exc:  # what it polled is handed over: the next client starts after it
                self._replace(client, str(exc))
        else:
            await self._check_reach(client)
        now = time.time()
        for rec in records:
            # produce-to-consume, on one machine's clock: the broker's CreateTime is the producer's
            self.env.metrics.sample("control_topic.delivery_s", max(0.0, now - rec.appended_at))
        return records

    def _fetch(self, client: _Client, max_records: int, timeout_s: float) -> list[Any]:
        msgs, client.early = client.early, []
        if not msgs:
            first = client.consumer.poll(max(timeout_s, 0.0))
            msgs = [first] if first is not None else []
        if msgs and len(msgs) < max_records:
            msgs += client.consumer.consume(num_messages=max_records - len(msgs), timeout=0)
        return msgs

    async def _check_reach(self, client: _Client) -> None:
        """After a poll that returned nothing: at most every PROBE_EVERY_S, read the topic's end; a
        consumer caught up with it is fine, one behind it (or unable to read it) for --rpc-timeout
        is replaced."""
        now = time.monotonic()
        if now - self._probed_at < PROBE_EVERY_S:
            return
        self._probed_at = now
        end = functools.partial(client.consumer.get_watermark_offsets, self._partition(), PROBE_EVERY_S, False)
        try:
            _, last = await client.thread.run(
                end, timeout_s=PROBE_EVERY_S + self.timeout_s, what="the topic's end", option=RPC_FLAG
            )
            if int(last) <= self.position:
                self._heard_at = time.monotonic()
            seen = f"the topic's end is {last}, its position {self.position}"
        except ClientStuck as exc:
            self._replace(client, str(exc))
            return
        except _confluent().KafkaException as exc:  # the broker is away, or this client lost it
            seen = f"the topic's end could not be read: {exc.args[0].str() if exc.args else exc}"
        silent = time.monotonic() - self._heard_at
        if silent > self.timeout_s:
            self._replace(client, f"{self.name} received nothing for {silent:.1f}s ({RPC_FLAG}); {seen}")

    def _replace(self, client: _Client, why: str) -> None:
        """Abandons ``client`` (its close is queued behind whatever it is stuck in); the next poll
        opens a new one at the position after the last record handed over."""
        self._client = None
        self.replaced += 1
        self.env.metrics.count("control_topic_consumer_replaced")
        self.env.tracer.instant(
            "kafka consumer replaced",
            cat=trace_events.TOPIC,
            args={"consumer": self.name, "group": client.group, "position": self.position, "why": why[:200]},
        )
        client.thread.submit(client.consumer.close)
        client.thread.shutdown()

    async def _reopen(self) -> _Client | None:
        """The replacement client, starting at the position; None (counted, traced) while the
        broker cannot be joined: the next poll tries again."""
        try:
            await self._open_client(self.position)
        except (WaitTimeout, _confluent().KafkaException) as exc:
            _count_error(self.env, exc)
            return None
        return self._client

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

    def _commit_sync(self, client: _Client) -> None:
        """The agent's ``commitSync`` after a poll; a failed commit is logged there, counted here.
        librdkafka's has no time limit (Java's: ``default.api.timeout.ms``): poll bounds it."""
        ck = _confluent()
        try:
            client.consumer.commit(asynchronous=False)
        except ck.KafkaException:
            self.env.metrics.count("control_topic_commit_errors")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:  # leaves the group
            await client.thread.run(
                client.consumer.close, timeout_s=self.timeout_s, what="its consumer's close", option=RPC_FLAG
            )
        except ClientStuck as exc:
            _count_error(self.env, exc)
        finally:
            client.thread.shutdown()


class BrokerPort:
    """The control topic on a broker: a producer, and a consumer per role that asks."""

    def __init__(self, env: Env, address: BrokerAddress, *, job_key: str, timeout_s: float) -> None:
        self.env = env
        self.address = address
        self.job_key = job_key
        self.timeout_s = timeout_s
        self._thread = ClientThread(f"kafka-producer-{env.role}")
        self._producer: Any = None

    def consumer(self, name: str) -> ControlConsumer:
        return BrokerConsumer(self.env, name, self.address, self.job_key, self.timeout_s)

    async def publish(self, message: ControlMessage) -> int:
        started = time.perf_counter()
        if self._producer is None:
            self._producer = self._new_producer()
        producer = self._producer
        what = f"the broker at {self.address} to take {message.kind}"
        try:  # _produce's flush is bounded by timeout_s; the margin is the thread's
            offset = await self._thread.run(
                self._produce, producer, message, timeout_s=self.timeout_s + 1.0, what=what, option=RPC_FLAG
            )
        except Exception:  # not delivered (in time): this producer may have lost every broker
            self._replace_producer(producer)
            raise
        self.env.metrics.sample("control_topic.publish_s", time.perf_counter() - started)
        self.env.tracer.instant(
            "topic.append", cat=trace_events.TOPIC, args={"kind": message.kind, "offset": offset, "broker": True}
        )
        return offset

    def _new_producer(self) -> Any:
        return _confluent().Producer(
            {
                "bootstrap.servers": self.address.bootstrap_servers,
                "linger.ms": 0,
                "message.timeout.ms": max(1, int(self.timeout_s * 1000)),
                "client.id": f"{self.env.role}-producer",
                "error_cb": lambda err: _count_error(self.env, err),
            }
        )

    def _produce(self, producer: Any, message: ControlMessage) -> int:
        report: list[Any] = []
        producer.produce(
            self.address.topic,
            key=message.kind.encode(),
            value=codec.encode(message),
            headers=[(JOB_HEADER, self.job_key.encode())],
            on_delivery=lambda err, msg: report.append((err, msg)),
        )
        producer.flush(self.timeout_s)
        if not report:
            what = f"the broker at {self.address} to take {message.kind}"
            raise WaitTimeout(waited_text(self.env.role, self.timeout_s, what, RPC_FLAG))
        err, msg = report[0]
        if err is not None:
            raise RuntimeError(f"{self.env.role}: {message.kind} was not delivered to {self.address}: {err.str()}")
        return int(msg.offset())

    def _replace_producer(self, producer: Any) -> None:
        """A producer whose message was not delivered may have lost every broker (see the module
        docstring): its queue is purged (the message cannot arrive later) and the next
        publish makes a new one, on a new thread."""
        if self._producer is producer:
            self._producer = None
        self.env.metrics.count("control_topic_producer_replaced")
        self.env.tracer.instant("kafka producer replaced", cat=trace_events.TOPIC, args={"role": self.env.role})
        old, self._thread = self._thread, ClientThread(self._thread.name)
        old.submit(functools.partial(producer.purge, blocking=False))
        old.submit(producer.flush, 0)  # serves the purged messages' reports
        old.shutdown()

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            what = f"the broker at {self.address} to take what is queued"
            try:
                await self._thread.run(
                    producer.flush, self.timeout_s, timeout_s=self.timeout_s + 1.0, what=what, option=RPC_FLAG
                )
            except ClientStuck as exc:
                _count_error(self.env, exc)
        self._thread.shutdown()
