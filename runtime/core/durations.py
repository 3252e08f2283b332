"""The durations of a job: Hudi's and Flink's defaults times one time scale, and the floors of the
transport deadlines.

One time scale: every duration Hudi or Flink gives a default to is that default times
``time_scale`` (``--time-scale``), unless set explicitly (an explicit value wins). The defaults,
in seconds before scaling (:data:`HUDI_FLINK_DURATIONS_S`):

* ``wait_tick_s`` 1 s: Hudi 0.10-1.0 ``StreamWriteFunction.instantToWrite`` / ``CkpMetadata`` readers
  poll once a second;
* ``checkpoint_timeout_s`` 600 s: Flink ``execution.checkpointing.timeout`` (10 min);
* ``commit_ack_timeout_s`` and ``instant_wait_timeout_s`` = the checkpoint timeout: Hudi
  ``write.commit.ack.timeout`` (-1: the checkpoint timeout, ``FlinkOptions``);
* ``checkpoint_interval_s`` 4 s: user-set in Flink (no default); 4 s keeps this lab's 0.2 s run;
* ``rpc_timeout_s`` 10 s: Flink ``akka.ask.timeout`` / ``pekko.ask.timeout``;
* ``write_status_timeout_s`` 300 s: Hudi Kafka Connect ``hoodie.kafka.coordinator.write.timeout.secs``;
* ``kafka_commit_interval_s`` 60 s: Hudi Kafka Connect ``hoodie.kafka.commit.interval.secs``
  (``KafkaConnectConfigs.COMMIT_INTERVAL_SECS``).

The multi-writer durations (``lock_wait_s``, like ``heartbeat_interval_s``) stay UNSET here and are
resolved by the concurrency control that uses them (:mod:`runtime.hudi.client.concurrency`).

The default scale, 0.05, keeps a run to seconds on a shared machine (a 10 min timeout becomes
30 s, the 1 s tick 50 ms: the values this lab used before the scale existed). What does not
scale: RPC and DFS latencies (real or simulated) and lock hold times are what they are, so at a
small scale they weigh more against the timeouts than in production.

The rule for transport deadlines (:data:`TRANSPORT_DEADLINE_FLOORS_S`, :func:`default_duration`):
a timeout that means "the peer is dead" rather than "the protocol gave up waiting" bounds a round
trip through the host's RPC stack, which the time scale does not shorten and which takes longer the
more callers one role answers at once. So its default is scaled like the others but never below its
floor: Flink's own value, or :data:`TRANSPORT_DEADLINE_PER_CALLER_S` per write task when that is
more (every write task calls the job manager, the coordinator and the control topic; one role
answers them all). ``rpc_timeout_s`` (Flink's ask timeout) bounds every role-to-role call, a write
task's operator-event acknowledgement, its bootstrap and its checkpoint ack to the job manager, the
instant requests of coordination-rpc, the timeline server's requests and the control topic's produce
and fetch requests. Measured on a busy 2-core host (load 25 to 65) at 256 write tasks: scaled to
0.5 s, their checkpoint acks to one job manager missed it and the job failed over three times; 10 s
held for operator-event and coordination-rpc, but a control-topic append waited behind 256
consumers' fetches for longer (one failover); 0.1 s per caller (25.6 s) holds for all three. The
model's waits (the tick, the intervals, the checkpoint, commit-ack, instant-wait and write-status
timeouts) scale as before. An explicit ``--rpc-timeout`` wins (fault scenarios set a short one to
make a lost message cost less).

``timeline_refresh_requests`` (RFC-50's server rescans after N requests) is a count, not a time.
"""

from __future__ import annotations

DEFAULT_TIME_SCALE = 0.05
UNSET = -1.0  # a duration left to its Hudi/Flink default times the time scale
# Hudi's and Flink's defaults in seconds, before the time scale (see the module docstring)
HUDI_FLINK_DURATIONS_S: dict[str, float] = {
    "wait_tick_s": 1.0,
    "checkpoint_timeout_s": 600.0,
    "checkpoint_interval_s": 4.0,
    "rpc_timeout_s": 10.0,
    "write_status_timeout_s": 300.0,
    "kafka_commit_interval_s": 60.0,
}
# durations whose default is the (effective) checkpoint timeout
CHECKPOINT_TIMEOUT_DURATIONS = ("commit_ack_timeout_s", "instant_wait_timeout_s")
SCALED_DURATIONS = (*HUDI_FLINK_DURATIONS_S, *CHECKPOINT_TIMEOUT_DURATIONS)
# transport deadlines: scaled, but never below a floor, Flink's own value or more with many
# callers of one role (see the module docstring)
TRANSPORT_DEADLINE_FLOORS_S: dict[str, float] = {"rpc_timeout_s": HUDI_FLINK_DURATIONS_S["rpc_timeout_s"]}
TRANSPORT_DEADLINE_PER_CALLER_S = 0.1


def transport_floor(name: str, callers: int) -> float:
    """The least a transport deadline may be when one role answers ``callers`` at once."""
    return max(TRANSPORT_DEADLINE_FLOORS_S[name], round(TRANSPORT_DEADLINE_PER_CALLER_S * callers, 9))


def default_duration(name: str, time_scale: float, callers: int) -> float:
    """The default of a Hudi/Flink duration at ``time_scale``: a model wait is its default times
    the scale; a transport deadline is too, but never below its floor for ``callers``."""
    scaled = round(HUDI_FLINK_DURATIONS_S[name] * time_scale, 9)
    return max(scaled, transport_floor(name, callers)) if name in TRANSPORT_DEADLINE_FLOORS_S else scaled
