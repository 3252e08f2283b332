package org.commitlab.conformance;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Watches the job's threads for a wait inside Hudi that does not end: every sample takes a thread
 * dump; a thread whose innermost Hudi frame stays the same (and not RUNNABLE) for the stall time
 * is reported once, with its frames from that Hudi frame down to the task's mailbox loop, as
 * {@code Class.method} (innermost first). What it records is read from the JVM, not inferred.
 */
final class Stalls {

  /** A waiting thread's innermost Hudi frame (as Class.method) and since when it was seen there. */
  private record Wait(String frame, long sinceMs) {}

  private final Map<Long, Wait> waits = new HashMap<>();
  private Map<String, Object> blocked;
  private long lastSampleMs;

  /** Takes a dump every 250 ms; reports the first wait that lasted {@code stallMs}. */
  void sample(long stallMs) {
    long now = System.currentTimeMillis();
    if (blocked != null || now - lastSampleMs < 250) {
      return;
    }
    lastSampleMs = now;
    for (ThreadInfo t : ManagementFactory.getThreadMXBean().dumpAllThreads(false, false)) {
      String frame = t.getThreadState() == Thread.State.RUNNABLE ? null : hudiFrame(t.getStackTrace());
      if (frame == null) {
        waits.remove(t.getThreadId());
        continue;
      }
      Wait seen = waits.get(t.getThreadId());
      if (seen == null || !seen.frame().equals(frame)) {
        waits.put(t.getThreadId(), new Wait(frame, now));
      } else if (now - seen.sinceMs() >= stallMs && isTaskThread(t)) {
        blocked = report(t, now - seen.sinceMs());
        return;
      }
    }
  }

  /** The run is ending without its commits: report the longest Hudi wait there is now, if any. */
  void dumpNow() {
    if (blocked != null) {
      return;
    }
    long now = System.currentTimeMillis();
    for (ThreadInfo t : ManagementFactory.getThreadMXBean().dumpAllThreads(false, false)) {
      Wait seen = waits.get(t.getThreadId());
      if (seen != null && isTaskThread(t) && seen.frame().equals(hudiFrame(t.getStackTrace()))) {
        blocked = report(t, now - seen.sinceMs());
        return;
      }
    }
  }

  Map<String, Object> blocked() {
    return blocked;
  }

  /** A Flink task thread: named after its operator chain, "... (i/n)#attempt". */
  private static boolean isTaskThread(ThreadInfo t) {
    return t.getThreadName().matches(".*\\(\\d+/\\d+\\).*");
  }

  private static String hudiFrame(StackTraceElement[] stack) {
    for (StackTraceElement e : stack) {
      if (e.getClassName().startsWith("org.apache.hudi.")) {
        return simple(e);
      }
    }
    return null;
  }

  private static String simple(StackTraceElement e) {
    String c = e.getClassName();
    return c.substring(c.lastIndexOf('.') + 1) + "." + e.getMethodName();
  }

  private static Map<String, Object> report(ThreadInfo t, long waitedMs) {
    List<String> frames = new ArrayList<>();
    List<String> full = new ArrayList<>();
    boolean inHudi = false;
    for (StackTraceElement e : t.getStackTrace()) {
      full.add(e.toString());
      inHudi |= e.getClassName().startsWith("org.apache.hudi.");
      if (!inHudi) {
        continue;
      }
      String name = simple(e);
      boolean keep = e.getClassName().startsWith("org.apache.hudi.") || name.startsWith("MailboxProcessor.")
          || name.startsWith("StreamTask.") || name.startsWith("StreamOneInputProcessor.");
      if (keep && (frames.isEmpty() || !frames.get(frames.size() - 1).equals(name))) {
        frames.add(name);
      }
      if (name.equals("MailboxProcessor.runMailboxLoop")) {
        break;
      }
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("thread", t.getThreadName());
    r.put("state", t.getThreadState().name());
    r.put("waited_ms", waitedMs);
    r.put("frame", frames.isEmpty() ? null : frames.get(0));
    r.put("frames", frames);
    r.put("stack", full);
    return r;
  }
}
