package org.commitlab.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * A timeline (.hoodie of the table, or of its metadata table) read with plain java.nio, so reading
 * it is not counted: the instant files present at the end plus those the counting file system saw
 * created (and later removed). Instant file names follow Hudi 0.x (table version 6):
 * {@code ts.action.requested}, {@code ts.action.inflight} ({@code ts.inflight} for a commit),
 * {@code ts.action} when completed; a compaction completes as {@code ts.commit}.
 */
final class TimelineReport {

  /** One state file of an instant. */
  record StateFile(String instant, String action, String state, String fileName) {}

  private static final List<String> ORDER = List.of("REQUESTED", "INFLIGHT", "COMPLETED");
  private static final List<String> WITH_COMMIT_METADATA =
      List.of("commit", "deltacommit", "compaction", "replacecommit", "logcompaction");

  private TimelineReport() {}

  static StateFile parse(String name) {
    int dot = name.indexOf('.');
    if (dot <= 0 || !name.substring(0, dot).chars().allMatch(Character::isDigit)) {
      return null;
    }
    String ts = name.substring(0, dot);
    String rest = name.substring(dot + 1);
    if (rest.equals("inflight")) {
      return new StateFile(ts, "commit", "INFLIGHT", name);
    }
    if (rest.endsWith(".requested")) {
      return new StateFile(ts, rest.substring(0, rest.length() - 10), "REQUESTED", name);
    }
    if (rest.endsWith(".inflight")) {
      return new StateFile(ts, rest.substring(0, rest.length() - 9), "INFLIGHT", name);
    }
    if (rest.contains(".")) {
      return null;
    }
    return new StateFile(ts, rest, "COMPLETED", name);
  }

  /**
   * @param table       the table root
   * @param timelineRel the timeline folder relative to the table (".hoodie" or ".hoodie/metadata/.hoodie")
   * @param dataPrefix  what write-stat paths are relative to, relative to the table ("" or ".hoodie/metadata/")
   */
  static List<Map<String, Object>> instants(Path table, String timelineRel, String dataPrefix) throws IOException {
    Path dir = table.resolve(timelineRel);
    TreeSet<String> names = new TreeSet<>();
    if (Files.isDirectory(dir)) {
      try (Stream<Path> s = Files.list(dir)) {
        s.filter(Files::isRegularFile).forEach(p -> names.add(p.getFileName().toString()));
      }
    }
    String prefix = timelineRel + "/";
    for (String rel : FsCallLog.created().keySet()) {
      if (rel.startsWith(prefix) && rel.indexOf('/', prefix.length()) < 0) {
        names.add(rel.substring(prefix.length()));
      }
    }
    Map<String, List<StateFile>> byInstant = new TreeMap<>();
    for (String n : names) {
      StateFile f = parse(n);
      if (f != null) {
        byInstant.computeIfAbsent(f.instant(), k -> new ArrayList<>()).add(f);
      }
    }
    List<Map<String, Object>> out = new ArrayList<>();
    for (Map.Entry<String, List<StateFile>> e : byInstant.entrySet()) {
      out.add(instant(table, dir, prefix, dataPrefix, e.getKey(), e.getValue()));
    }
    return out;
  }

  private static Map<String, Object> instant(Path table, Path dir, String prefix, String dataPrefix,
      String ts, List<StateFile> files) throws IOException {
    files.sort((a, b) -> ORDER.indexOf(a.state()) - ORDER.indexOf(b.state()));
    String action = files.get(0).action();
    List<Map<String, Object>> states = new ArrayList<>();
    StateFile completed = null;
    for (StateFile f : files) {
      Map<String, Object> st = new LinkedHashMap<>();
      st.put("state", f.state());
      st.put("time_ms", seenMs(dir, prefix + f.fileName(), f.fileName()));
      states.add(st);
      if (f.state().equals("COMPLETED")) {
        completed = f;
      }
    }
    List<Map<String, Object>> written = new ArrayList<>();
    long records = 0;
    Path completedFile = completed == null ? null : dir.resolve(completed.fileName());
    if (completedFile != null && WITH_COMMIT_METADATA.contains(action) && Files.size(completedFile) > 0) {
      JsonNode meta = new ObjectMapper().readTree(completedFile.toFile());
      JsonNode parts = meta.path("partitionToWriteStats");
      for (JsonNode stats : parts) {
        for (JsonNode w : stats) {
          Map<String, Object> f = new LinkedHashMap<>();
          f.put("path", dataPrefix + w.path("path").asText());
          f.put("bytes", w.path("fileSizeInBytes").asLong());
          written.add(f);
          records += w.path("numWrites").asLong();
        }
      }
    }
    Map<String, Object> i = new LinkedHashMap<>();
    i.put("instant", ts);
    i.put("action", action);
    i.put("states", states);
    i.put("files", written);
    i.put("records", records);
    return i;
  }

  private static Long seenMs(Path dir, String rel, String name) throws IOException {
    FsCallLog.Seen seen = FsCallLog.created().get(rel);
    if (seen != null) {
      return seen.timeMs();
    }
    Path p = dir.resolve(name);
    return Files.exists(p) ? Files.getLastModifiedTime(p).toMillis() : null;
  }
}
