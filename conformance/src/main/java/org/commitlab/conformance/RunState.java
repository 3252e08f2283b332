package org.commitlab.conformance;

import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;

/** What the sources and the harness share in this JVM (the MiniCluster runs in it). */
final class RunState {

  /** Checkpoint id -> epoch ms of the first notifyCheckpointComplete seen by a source subtask. */
  static final Map<Long, Long> CHECKPOINT_COMPLETED_MS = new ConcurrentHashMap<>();

  /** Epoch ms of the first record a source subtask handed on (0: none yet). */
  static final java.util.concurrent.atomic.AtomicLong FIRST_EMIT_MS = new java.util.concurrent.atomic.AtomicLong();

  /** The JVM's CPU time (ns, every thread) and GC time (ms, every collector) at the first record handed on. */
  static final java.util.concurrent.atomic.AtomicLong FIRST_EMIT_CPU_NS = new java.util.concurrent.atomic.AtomicLong();
  static final java.util.concurrent.atomic.AtomicLong FIRST_EMIT_GC_MS = new java.util.concurrent.atomic.AtomicLong();

  /** Preload: the source subtasks that finished parsing their rounds and run, and when the last did. */
  static final java.util.concurrent.atomic.AtomicInteger SOURCES_RUNNING = new java.util.concurrent.atomic.AtomicInteger();
  static final java.util.concurrent.atomic.AtomicLong SOURCES_RUNNING_MS = new java.util.concurrent.atomic.AtomicLong();

  /** The highest attempt number a source subtask started with: the job's failovers. */
  static final java.util.concurrent.atomic.AtomicInteger ATTEMPTS = new java.util.concurrent.atomic.AtomicInteger();

  /** The completion notices the coordinator received late (LateNotice), in order. */
  static final Queue<String> LATE_NOTICES = new ConcurrentLinkedQueue<>();

  /** The crashes the task-crash scenario injected, in order. */
  static final Queue<String> CRASHES = new ConcurrentLinkedQueue<>();

  /** Deviations from "round k is exactly the data before barrier k". */
  static final Queue<String> ANOMALIES = new ConcurrentLinkedQueue<>();

  /** Set by the harness once Hudi committed the last checkpoint: the sources may stop waiting. */
  static volatile boolean released;

  private RunState() {}

  /** The first record is going out now: its time, and the JVM's CPU and GC time so far (once). */
  static void firstEmit() {
    if (FIRST_EMIT_MS.compareAndSet(0L, System.currentTimeMillis())) {
      FIRST_EMIT_CPU_NS.set(cpuNs());
      FIRST_EMIT_GC_MS.set(gcMs());
    }
  }

  /** CPU time of every thread of this JVM so far, ns (what the write phase costs, whatever the load). */
  static long cpuNs() {
    java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
    return os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() : -1L;
  }

  /** Time the collectors spent so far (their pauses and, for a concurrent collector, its cycles), ms. */
  static long gcMs() {
    long ms = 0;
    for (java.lang.management.GarbageCollectorMXBean gc : java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()) {
      ms += Math.max(0L, gc.getCollectionTime());
    }
    return ms;
  }
}
