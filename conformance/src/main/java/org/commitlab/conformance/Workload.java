package org.commitlab.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.types.DataType;

import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The lab's input directory D: workload.json and the per-task round files it names. */
final class Workload {

  /** One schema column. */
  record Field(String name, String type) implements Serializable {}

  final String tablePath;
  final String tableName;
  final String tableType;
  final int writers;
  final int checkpoints;
  final long checkpointIntervalMs;
  final int numBuckets;
  final String recordKey;
  final String precombine;
  final String partitionField;
  final Field[] fields;
  final Map<String, String> hudiOptions = new LinkedHashMap<>();
  /** rounds.get(t).get(k-1): absolute path of write task t's records of round k. */
  final List<List<String>> rounds = new ArrayList<>();
  /** The scenario's name and its settings (all optional): what commitlab conformance --scenario asks. */
  final String scenario;
  final long checkpointTimeoutMs; // 0: Flink's default (10 min)
  final long bufferTimeoutMs; // -1: Flink's default (100 ms)
  final int restarts; // fixed-delay restarts allowed (0: none)
  final int crashRound; // task-crash: the write task's round whose snapshot throws (0: none)
  final int crashTask;
  final long stallMs; // a task thread in the same Hudi wait this long is dumped
  final boolean hudiRouting; // Hudi's own edge into the write tasks instead of the lab's forward one
  final boolean preloadRounds; // every round read before the first is emitted (a throughput run)
  final boolean watchStalls; // thread dumps every 250 ms for a Hudi wait that does not end (off: a throughput run)
  /** Checkpoint id -> ms its completion notice reaches Hudi's coordinator late (the lab's notify_delay_s). */
  final Map<Long, Long> noticeDelaysMs = new LinkedHashMap<>();

  private Workload(Path dir, JsonNode j) {
    tablePath = need(j, "table_path").asText();
    tableName = need(j, "table_name").asText();
    tableType = need(j, "table_type").asText();
    writers = need(j, "writers").asInt();
    checkpoints = need(j, "checkpoints").asInt();
    checkpointIntervalMs = need(j, "checkpoint_interval_ms").asLong();
    numBuckets = need(j, "num_buckets").asInt();
    recordKey = need(j, "record_key").asText();
    precombine = need(j, "precombine").asText();
    partitionField = need(j, "partition_field").asText();
    List<Field> fs = new ArrayList<>();
    for (JsonNode f : need(j, "schema")) {
      fs.add(new Field(f.get("name").asText(), f.get("type").asText()));
    }
    fields = fs.toArray(new Field[0]);
    if (j.has("hudi_options")) {
      j.get("hudi_options").fields().forEachRemaining(e -> hudiOptions.put(e.getKey(), e.getValue().asText()));
    }
    for (JsonNode task : need(j, "rounds")) {
      List<String> files = new ArrayList<>();
      for (JsonNode f : task) {
        files.add(dir.resolve(f.asText()).toAbsolutePath().toString());
      }
      rounds.add(files);
    }
    preloadRounds = j.has("preload_rounds") && j.get("preload_rounds").asBoolean();
    watchStalls = !j.has("watch_stalls") || j.get("watch_stalls").asBoolean();
    JsonNode sc = j.has("scenario") ? j.get("scenario") : mapperNode();
    scenario = sc.has("name") ? sc.get("name").asText() : "happy-path";
    checkpointTimeoutMs = sc.has("checkpoint_timeout_ms") ? sc.get("checkpoint_timeout_ms").asLong() : 0;
    bufferTimeoutMs = sc.has("buffer_timeout_ms") ? sc.get("buffer_timeout_ms").asLong() : -1;
    restarts = sc.has("restarts") ? sc.get("restarts").asInt() : 0;
    crashRound = sc.has("crash_round") ? sc.get("crash_round").asInt() : 0;
    crashTask = sc.has("crash_task") ? sc.get("crash_task").asInt() : 0;
    stallMs = sc.has("stall_ms") ? sc.get("stall_ms").asLong() : 3000;
    hudiRouting = sc.has("hudi_routing") && sc.get("hudi_routing").asBoolean();
    if (sc.has("notice_delay_ms")) {
      sc.get("notice_delay_ms").fields().forEachRemaining(
          e -> noticeDelaysMs.put(Long.parseLong(e.getKey()), e.getValue().asLong()));
    }
    if (rounds.size() != writers) {
      throw new IllegalArgumentException("workload.json: rounds has " + rounds.size()
          + " task lists but writers is " + writers);
    }
    for (List<String> r : rounds) {
      if (r.size() != checkpoints) {
        throw new IllegalArgumentException("workload.json: a task has " + r.size()
            + " rounds but checkpoints is " + checkpoints);
      }
    }
  }

  private static JsonNode mapperNode() {
    return new ObjectMapper().createObjectNode();
  }

  /** The schema column's position. */
  int fieldIndex(String name) {
    for (int i = 0; i < fields.length; i++) {
      if (fields[i].name().equals(name)) {
        return i;
      }
    }
    throw new IllegalArgumentException("workload.json: no field " + name + " in the schema");
  }

  /** Rounds in which some task has a record (each is one data commit when it completes). */
  int roundsWithData() throws IOException {
    int n = 0;
    for (int k = 0; k < checkpoints; k++) {
      boolean any = false;
      for (List<String> task : rounds) {
        any |= Files.lines(Path.of(task.get(k))).anyMatch(l -> !l.isBlank());
      }
      n += any ? 1 : 0;
    }
    return n;
  }

  private static JsonNode need(JsonNode j, String key) {
    if (!j.has(key)) {
      throw new IllegalArgumentException("workload.json: missing key '" + key + "'");
    }
    return j.get(key);
  }

  static Workload read(Path dir) throws IOException {
    return new Workload(dir, new ObjectMapper().readTree(dir.resolve("workload.json").toFile()));
  }

  static DataType dataType(Field f, boolean notNull) {
    DataType t = switch (f.type()) {
      case "string" -> DataTypes.STRING();
      case "long" -> DataTypes.BIGINT();
      case "int" -> DataTypes.INT();
      case "double" -> DataTypes.DOUBLE();
      case "boolean" -> DataTypes.BOOLEAN();
      default -> throw new IllegalArgumentException("workload.json: unknown type '" + f.type()
          + "' of field " + f.name() + " (string, long, int, double, boolean)");
    };
    return notNull ? t.notNull() : t.nullable();
  }

  static List<RowData> readRows(String file, Field[] fields) throws IOException {
    ObjectMapper mapper = new ObjectMapper();
    List<RowData> rows = new ArrayList<>();
    for (String line : Files.readAllLines(Path.of(file))) {
      if (line.isBlank()) {
        continue;
      }
      JsonNode o = mapper.readTree(line);
      GenericRowData row = new GenericRowData(fields.length);
      for (int i = 0; i < fields.length; i++) {
        JsonNode v = o.get(fields[i].name());
        row.setField(i, v == null || v.isNull() ? null : value(fields[i].type(), v));
      }
      rows.add(row);
    }
    return rows;
  }

  private static Object value(String type, JsonNode v) {
    return switch (type) {
      case "string" -> StringData.fromString(v.asText());
      case "long" -> v.asLong();
      case "int" -> v.asInt();
      case "double" -> v.asDouble();
      case "boolean" -> v.asBoolean();
      default -> throw new IllegalArgumentException("unknown type " + type);
    };
  }
}
