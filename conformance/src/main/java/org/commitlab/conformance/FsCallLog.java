package org.commitlab.conformance;

import org.apache.hadoop.fs.Path;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Every file-system call Hudi made under the table, with the role that made it, the table component
 * its path belongs to, a global sequence number and the wall time; and the first time each timeline
 * file was created (by create or by rename onto it), which gives the instants' state times in ms.
 * Static: the MiniCluster runs every task, the job master and Hudi's timeline server in this JVM.
 */
public final class FsCallLog {

  /** One counted call. */
  public record Call(long seq, long timeMs, String role, String component, String op, boolean parallel) {}

  /** The first creation of a timeline file. */
  public record Seen(long seq, long timeMs) {}

  /** Set CONFORMANCE_DEBUG_ROLE=other to print the stack of every call attributed to that role. */
  private static final String DEBUG_ROLE = System.getenv("CONFORMANCE_DEBUG_ROLE");
  private static volatile String tableRoot;
  private static final AtomicLong SEQ = new AtomicLong();
  private static final Queue<Call> CALLS = new ConcurrentLinkedQueue<>();
  private static final Map<String, Seen> CREATED = new ConcurrentHashMap<>();
  /** "component|op|role|caller" -> calls: which Hudi method makes which calls (fs_callers). */
  private static final Map<String, LongAdder> CALLERS = new ConcurrentHashMap<>();

  private FsCallLog() {}

  /** Counts only paths under this absolute directory from now on. */
  public static void watch(String absoluteTablePath) {
    String root = absoluteTablePath.endsWith("/")
        ? absoluteTablePath.substring(0, absoluteTablePath.length() - 1) : absoluteTablePath;
    tableRoot = root;
  }

  /**
   * The calls in sequence order, a fork-join worker's call given the role of the nearest call by
   * sequence that went through Hudi's engine context on a thread with a role ("other" if none).
   */
  public static List<Call> resolvedCalls() {
    List<Call> all = new ArrayList<>(CALLS);
    all.sort(Comparator.comparingLong(Call::seq));
    List<Call> known = all.stream()
        .filter(c -> c.parallel() && !c.role().equals(Roles.PARALLEL)).collect(Collectors.toList());
    List<Call> out = new ArrayList<>(all.size());
    for (Call c : all) {
      if (!c.role().equals(Roles.PARALLEL)) {
        out.add(c);
        continue;
      }
      String role = known.stream()
          .min(Comparator.comparingLong(k -> Math.abs(k.seq() - c.seq())))
          .map(Call::role).orElse("other");
      out.add(new Call(c.seq(), c.timeMs(), role, c.component(), c.op(), true));
    }
    return out;
  }

  /** The calls by table component, operation, role and calling Hudi method, most frequent first. */
  public static List<Map<String, Object>> callers() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Map.Entry<String, LongAdder> e : CALLERS.entrySet()) {
      String[] k = e.getKey().split("\\|", 4);
      Map<String, Object> row = new java.util.LinkedHashMap<>();
      row.put("component", k[0]);
      row.put("op", k[1]);
      row.put("role", k[2]);
      row.put("caller", k[3]);
      row.put("count", e.getValue().sum());
      out.add(row);
    }
    out.sort(Comparator.comparingLong((Map<String, Object> r) -> -(Long) r.get("count")));
    return out;
  }

  public static Map<String, Seen> created() {
    return CREATED;
  }

  static void record(String op, Path path, Path target) {
    Optional<String> rel = relative(path);
    if (rel.isEmpty()) {
      return;
    }
    long seq = SEQ.incrementAndGet();
    long now = System.currentTimeMillis();
    Roles.Attribution who = Roles.of(Thread.currentThread());
    String role = who.role();
    if (DEBUG_ROLE != null && DEBUG_ROLE.equals(role)) {
      new Throwable("role " + role + " on thread " + Thread.currentThread().getName() + ": " + op + " " + rel.get())
          .printStackTrace();
    }
    String component = component(rel.get());
    CALLS.add(new Call(seq, now, role, component, op, who.parallel()));
    CALLERS.computeIfAbsent(component + "|" + op + "|" + role + "|" + Roles.caller(), k -> new LongAdder()).increment();
    String created = "create".equals(op) ? rel.get()
        : "rename".equals(op) ? relative(target).orElse(null) : null;
    if (created != null) {
      CREATED.putIfAbsent(created, new Seen(seq, now));
    }
  }

  private static Optional<String> relative(Path path) {
    String root = tableRoot;
    if (root == null || path == null) {
      return Optional.empty();
    }
    String p = path.toUri().getPath();
    if (p == null) {
      return Optional.empty();
    }
    if (p.equals(root)) {
      return Optional.of("");
    }
    if (p.startsWith(root + "/")) {
      return Optional.of(p.substring(root.length() + 1));
    }
    return Optional.empty();
  }

  /**
   * The table component of a path relative to the table root; first match wins. A directory
   * matches its own prefix too ({@code .hoodie/metadata} is metadata, {@code .hoodie} timeline).
   */
  public static String component(String rel) {
    String r = rel + "/";
    if (r.startsWith(".hoodie/metadata/")) {
      return "metadata";
    }
    if (r.startsWith(".hoodie/.temp/")) {
      return "markers";
    }
    if (r.startsWith(".hoodie/.aux/ckp_meta/")) {
      return "ckp_meta";
    }
    if (r.startsWith(".hoodie/.heartbeat/")) {
      return "heartbeat";
    }
    if (r.startsWith(".hoodie/archived/") || r.startsWith(".hoodie/timeline/history/")) {
      return "archive";
    }
    if (r.startsWith(".hoodie/.aux/")) {
      return "aux";
    }
    if (rel.matches("\\.hoodie/(timeline/)?\\d{14,17}(_\\d{14,17})?\\.clean(\\.requested|\\.inflight)?")) {
      return "clean";
    }
    if (rel.matches("\\.hoodie/(timeline/)?\\d{14,17}(_\\d{14,17})?\\.rollback(\\.requested|\\.inflight)?")) {
      return "rollback";
    }
    if (r.startsWith(".hoodie/")) {
      return "timeline";
    }
    return "data";
  }
}
