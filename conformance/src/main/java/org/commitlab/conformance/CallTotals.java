package org.commitlab.conformance;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** The counted file-system calls summed by (role, component, op), overall and per checkpoint. */
final class CallTotals {

  private CallTotals() {}

  static List<Map<String, Object>> total() {
    TreeMap<List<String>, Long> sums = new TreeMap<>(CallTotals::compare);
    for (FsCallLog.Call c : FsCallLog.resolvedCalls()) {
      sums.merge(List.of(c.role(), c.component(), c.op()), 1L, Long::sum);
    }
    List<Map<String, Object>> out = new ArrayList<>();
    sums.forEach((k, n) -> out.add(row(null, k, n)));
    return out;
  }

  /**
   * A call belongs to checkpoint k when it came after checkpoint k-1's commit completed (the start
   * of the run for k = 1) and no later than the creation of checkpoint k's completed instant file;
   * calls after the last commit belong to K+1. Compared by the calls' global sequence numbers.
   */
  static List<Map<String, Object>> byCheckpoint(List<long[]> commitSeen, int checkpoints) {
    TreeMap<List<String>, Long> sums = new TreeMap<>(CallTotals::compare);
    for (FsCallLog.Call c : FsCallLog.resolvedCalls()) {
      int k = 1;
      while (k <= commitSeen.size() && c.seq() > commitSeen.get(k - 1)[0]) {
        k++;
      }
      if (k > commitSeen.size()) {
        k = commitSeen.size() >= checkpoints ? checkpoints + 1 : commitSeen.size() + 1;
      }
      sums.merge(List.of(String.format("%09d", k), c.role(), c.component(), c.op()), 1L, Long::sum);
    }
    List<Map<String, Object>> out = new ArrayList<>();
    sums.forEach((k, n) -> out.add(row(Integer.parseInt(k.get(0)), k.subList(1, 4), n)));
    return out;
  }

  private static Map<String, Object> row(Integer checkpoint, List<String> key, long n) {
    Map<String, Object> m = new LinkedHashMap<>();
    if (checkpoint != null) {
      m.put("checkpoint", checkpoint);
    }
    m.put("role", key.get(0));
    m.put("component", key.get(1));
    m.put("op", key.get(2));
    m.put("count", n);
    return m;
  }

  private static int compare(List<String> a, List<String> b) {
    for (int i = 0; i < a.size(); i++) {
      int c = a.get(i).compareTo(b.get(i));
      if (c != 0) {
        return c;
      }
    }
    return 0;
  }
}
