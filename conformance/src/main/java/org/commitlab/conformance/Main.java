package org.commitlab.conformance;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.restartstrategy.RestartStrategies;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;
import org.apache.flink.runtime.state.storage.JobManagerCheckpointStorage;
import org.apache.flink.streaming.api.CheckpointingMode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.catalog.CatalogTable;
import org.apache.flink.table.catalog.Column;
import org.apache.flink.table.catalog.ResolvedCatalogTable;
import org.apache.flink.table.catalog.ResolvedSchema;
import org.apache.flink.table.catalog.UniqueConstraint;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.logical.RowType;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.flink.util.ExceptionUtils;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.configuration.FlinkOptions;
import org.apache.hudi.sink.utils.Pipelines;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Runs Hudi's own Flink streaming writer (bucket index upsert: Hudi's row-to-record map, its
 * BucketStreamWriteOperator with the StreamWriteOperatorCoordinator, then Pipelines.compact for
 * merge-on-read or Pipelines.clean, as HoodieTableSink builds them) in a local MiniCluster on the
 * lab's rounds, and records the timeline and every file-system call into one JSON file.
 *
 * <p>Usage: {@code --input D --out FILE [--timeout-s 300] [--grace-ms 1000]}. Exit 0: every
 * checkpoint committed; 1: the job failed; 2: bad arguments or input; 3: timed out.
 */
public final class Main {

  private Main() {}

  public static void main(String[] args) throws Exception {
    long jvmStart = java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime();
    Map<String, String> a = new LinkedHashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      a.put(args[i], args[i + 1]);
    }
    if (!a.containsKey("--input") || !a.containsKey("--out") || args.length % 2 != 0) {
      System.err.println("usage: run.sh <release> --input DIR --out FILE [--timeout-s 300] [--grace-ms 1000]");
      System.exit(2);
    }
    Workload w;
    try {
      w = Workload.read(Path.of(a.get("--input")));
    } catch (IOException | IllegalArgumentException e) {
      System.err.println("error: " + e.getMessage());
      System.exit(2);
      return;
    }
    long timeoutS = Long.parseLong(a.getOrDefault("--timeout-s", "300"));
    long graceMs = Long.parseLong(a.getOrDefault("--grace-ms", "1000"));
    Run run = new Run(w, Path.of(a.get("--out")), jvmStart + timeoutS * 1000, timeoutS, graceMs);
    System.exit(run.execute());
  }

  /** One conformance run. */
  static final class Run {
    private final Workload w;
    private final Path out;
    private final long deadlineMs;
    private final long timeoutS;
    private final long graceMs;
    private final Map<String, String> options = new TreeMap<>();
    private final List<long[]> commitSeen = new ArrayList<>(); // [seq, timeMs] per data commit, in order
    /** Data instant -> [JVM CPU ns, GC ms] when the monitor first saw it completed (within its 10 ms poll). */
    private final Map<String, long[]> commitCost = new java.util.HashMap<>();
    private final List<String> costOrder = new ArrayList<>(); // the data instants completed, in order
    private String error;
    private int expectedCommits;
    private String jobStatus = "RUNNING";
    private final Stalls stalls = new Stalls();

    Run(Workload w, Path out, long deadlineMs, long timeoutS, long graceMs) {
      this.w = w;
      this.out = out;
      this.deadlineMs = deadlineMs;
      this.timeoutS = timeoutS;
      this.graceMs = graceMs;
    }

    int execute() throws Exception {
      FsCallLog.watch(Path.of(w.tablePath).toAbsolutePath().toString());
      org.apache.flink.configuration.Configuration conf = hudiConf();
      StreamExecutionEnvironment env = environment();
      conf.setLong(FlinkOptions.WRITE_COMMIT_ACK_TIMEOUT, env.getCheckpointConfig().getCheckpointTimeout());
      ReleaseApi.setupSink(conf, w.writers);
      options.putAll(conf.toMap());
      buildPipeline(env, conf);
      // hoodie.allow.empty.commit (read by the Flink writer from 0.14, false there unless set):
      // a round without data is committed too
      boolean emptyCommits = Boolean.parseBoolean(conf.toMap().getOrDefault("hoodie.allow.empty.commit", "false"));
      expectedCommits = emptyCommits ? w.checkpoints : w.roundsWithData();

      String routing = w.hudiRouting ? null : ReleaseApi.routingWarning(w);
      if (routing != null) {
        System.err.println("warning: " + routing);
      }
      long start = System.currentTimeMillis();
      JobClient job = env.executeAsync("commitlab conformance " + w.tableName);
      int rc = monitor(job);
      double wallS = (System.currentTimeMillis() - start) / 1000.0;
      writeReport(wallS);
      return rc;
    }

    /** Hudi's options as HoodieTableFactory sets them up for a table declared with this schema. */
    private org.apache.flink.configuration.Configuration hudiConf() throws Exception {
      org.apache.flink.configuration.Configuration conf = new org.apache.flink.configuration.Configuration();
      conf.setString(FlinkOptions.PATH, Path.of(w.tablePath).toAbsolutePath().toString());
      conf.setString(FlinkOptions.TABLE_NAME, w.tableName);
      conf.setString(FlinkOptions.TABLE_TYPE, w.tableType);
      conf.setString(FlinkOptions.OPERATION, "upsert");
      conf.setString(FlinkOptions.RECORD_KEY_FIELD, w.recordKey);
      conf.setString(FlinkOptions.PRECOMBINE_FIELD, w.precombine);
      conf.setString(FlinkOptions.PARTITION_PATH_FIELD, w.partitionField);
      conf.setString(FlinkOptions.KEYGEN_CLASS_NAME, "org.apache.hudi.keygen.SimpleAvroKeyGenerator");
      conf.setBoolean(FlinkOptions.HIVE_STYLE_PARTITIONING, false);
      conf.setBoolean(FlinkOptions.URL_ENCODE_PARTITIONING, false);
      ReleaseApi.indexOptions(conf, w);
      conf.setString("hadoop.fs.file.impl", CountingLocalFileSystem.class.getName());
      conf.setString("hadoop.fs.file.impl.disable.cache", "true");
      w.hudiOptions.forEach(conf::setString);
      conf.setInteger(FlinkOptions.WRITE_TASKS, w.writers);

      List<Column> columns = new ArrayList<>();
      for (Workload.Field f : w.fields) {
        columns.add(Column.physical(f.name(), Workload.dataType(f, f.name().equals(w.recordKey))));
      }
      ResolvedSchema schema = new ResolvedSchema(columns, Collections.emptyList(),
          UniqueConstraint.primaryKey("pk_" + w.recordKey, List.of(w.recordKey)));
      CatalogTable table = CatalogTable.of(
          org.apache.flink.table.api.Schema.newBuilder().fromResolvedSchema(schema).build(),
          "conformance", List.of(w.partitionField), conf.toMap());
      ResolvedCatalogTable resolved = new ResolvedCatalogTable(table, schema);
      ReleaseApi.setupConfOptions(conf, w.tableName, resolved, schema);
      return conf;
    }

    private StreamExecutionEnvironment environment() {
      org.apache.flink.configuration.Configuration fc = new org.apache.flink.configuration.Configuration();
      fc.setString("taskmanager.memory.managed.size", "64m");
      // Hadoop's shutdown hook reads its configuration through the job's closed class loader.
      fc.setString("classloader.check-leaked-classloader", "false");
      fc.setString("taskmanager.memory.network.min", "32m");
      fc.setString("taskmanager.memory.network.max", "32m");
      StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(w.writers, fc);
      env.enableCheckpointing(w.checkpointIntervalMs, CheckpointingMode.EXACTLY_ONCE);
      env.getCheckpointConfig().setMaxConcurrentCheckpoints(1);
      env.getCheckpointConfig().setCheckpointStorage(new JobManagerCheckpointStorage());
      env.setStateBackend(new HashMapStateBackend());
      if (w.checkpointTimeoutMs > 0) {
        env.getCheckpointConfig().setCheckpointTimeout(w.checkpointTimeoutMs);
      }
      if (w.bufferTimeoutMs >= 0) {
        env.setBufferTimeout(w.bufferTimeoutMs);
        options.put("flink.execution.buffer-timeout", w.bufferTimeoutMs + " ms");
      }
      env.setRestartStrategy(w.restarts > 0 ? RestartStrategies.fixedDelayRestart(w.restarts, 0L)
          : RestartStrategies.noRestart());
      options.put("flink.execution.checkpointing.interval", w.checkpointIntervalMs + " ms");
      options.put("flink.execution.checkpointing.mode", "EXACTLY_ONCE");
      options.put("flink.execution.checkpointing.max-concurrent-checkpoints", "1");
      options.put("flink.execution.checkpointing.timeout",
          env.getCheckpointConfig().getCheckpointTimeout() + " ms");
      options.put("flink.state.backend.type", "hashmap");
      options.put("flink.state.checkpoint-storage", "jobmanager");
      options.put("flink.restart-strategy", w.restarts > 0 ? "fixed-delay, " + w.restarts + " attempts" : "none");
      options.put("flink.parallelism.default", String.valueOf(w.writers));
      fc.toMap().forEach((k, v) -> options.put("flink." + k, v));
      return env;
    }

    /** HoodieTableSink's streaming upsert pipeline as the release builds it (ReleaseApi.write), then its clean or compaction. */
    private void buildPipeline(StreamExecutionEnvironment env, org.apache.flink.configuration.Configuration conf) {
      RowType rowType = rowType();
      DataStream<RowData> source = env
          .addSource(new RoundSource(w.rounds, w.fields, w.preloadRounds), "round_source", InternalTypeInfo.of(rowType))
          .setParallelism(w.writers);
      CrashInSnapshot<HoodieRecord> crash = w.crashRound > 0 ? new CrashInSnapshot<>(w.crashRound, w.crashTask) : null;
      DataStream<Object> pipeline = ReleaseApi.write(conf, rowType, source, crash, w.hudiRouting, w.noticeDelaysMs);
      if (ReleaseApi.needsAsyncCompaction(conf)) {
        Pipelines.compact(conf, pipeline);
      } else {
        Pipelines.clean(conf, pipeline);
      }
    }

    private RowType rowType() {
      List<org.apache.flink.table.api.DataTypes.Field> fs = new ArrayList<>();
      for (Workload.Field f : w.fields) {
        fs.add(DataTypes.FIELD(f.name(), Workload.dataType(f, f.name().equals(w.recordKey))));
      }
      return (RowType) DataTypes.ROW(fs.toArray(new DataTypes.Field[0])).notNull().getLogicalType();
    }

    /**
     * Waits, bounded, for Hudi to commit every round that has data (sampling the task threads for a
     * wait that does not end: a thread dump names the blocked frame); then cancels the job. A job
     * that fails is not touched again: a failed job shut its MiniCluster down.
     */
    private int monitor(JobClient job) throws Exception {
      CompletableFuture<JobExecutionResult> result = job.getJobExecutionResult();
      String dataAction = w.tableType.equalsIgnoreCase("COPY_ON_WRITE") ? "commit" : "deltacommit";
      while (true) {
        collectCommits(dataAction);
        if (w.watchStalls) {
          stalls.sample(w.stallMs);
        }
        if (result.isDone()) {
          try {
            result.get();
            jobStatus = "FINISHED";
            error = "the job finished before round " + (commitSeen.size() + 1) + " was committed";
          } catch (Exception e) {
            jobStatus = "FAILED";
            Throwable root = ExceptionUtils.stripExecutionException(e);
            while (root.getCause() != null && root.getCause() != root) {
              root = root.getCause();
            }
            error = root.getClass().getName() + ": " + root.getMessage();
          }
          return 1;
        }
        if (commitSeen.size() >= expectedCommits) {
          break;
        }
        if (System.currentTimeMillis() > deadlineMs) {
          jobStatus = "TIMED_OUT";
          stalls.dumpNow();
          error = "timed out after " + timeoutS + " s waiting for " + waitingFor() + " (--timeout-s)";
          cancel(job, result);
          return 3;
        }
        Thread.sleep(10);
      }
      Thread.sleep(graceMs);
      RunState.released = true;
      jobStatus = "COMMITTED";
      cancel(job, result);
      if (!RunState.ANOMALIES.isEmpty()) {
        error = "input order not kept: " + String.join("; ", RunState.ANOMALIES);
        return 1;
      }
      return 0;
    }

    private String waitingFor() {
      int next = commitSeen.size() + 1;
      return "Hudi's commit of round " + next + " of the " + expectedCommits + " rounds with data";
    }

    private void cancel(JobClient job, CompletableFuture<JobExecutionResult> result) {
      RunState.released = true;
      try {
        job.cancel().get(60, TimeUnit.SECONDS);
        result.handle((r, t) -> null).get(60, TimeUnit.SECONDS);
      } catch (Exception e) {
        System.err.println("warning: cancelling the job: " + e);
      }
    }

    /** The data commits Hudi completed so far, in instant order, from the observed timeline files. */
    private void collectCommits(String dataAction) {
      TreeMap<String, FsCallLog.Seen> done = new TreeMap<>();
      for (Map.Entry<String, FsCallLog.Seen> e : FsCallLog.created().entrySet()) {
        String rel = e.getKey();
        if (rel.startsWith(".hoodie/") && rel.indexOf('/', 8) < 0) {
          TimelineReport.StateFile f = TimelineReport.parse(rel.substring(8));
          if (f != null && f.state().equals("COMPLETED") && f.action().equals(dataAction)
              && !FsCallLog.created().containsKey(".hoodie/" + f.instant() + ".compaction.requested")) {
            done.put(f.instant(), e.getValue());
          }
        }
      }
      commitSeen.clear();
      done.values().forEach(s -> commitSeen.add(new long[] {s.seq(), s.timeMs()}));
      for (String instant : done.keySet()) {
        commitCost.computeIfAbsent(instant, i -> new long[] {RunState.cpuNs(), RunState.gcMs()});
      }
      costOrder.clear();
      costOrder.addAll(done.keySet());
    }

    /** The JVM Hudi ran in: its collectors, heap bound and processors (as java was started). */
    private static Map<String, Object> jvm() {
      Map<String, Object> j = new LinkedHashMap<>();
      List<String> gcs = new ArrayList<>();
      java.lang.management.ManagementFactory.getGarbageCollectorMXBeans().forEach(g -> gcs.add(g.getName()));
      j.put("collectors", gcs);
      j.put("max_heap_mb", Runtime.getRuntime().maxMemory() / (1024 * 1024));
      j.put("processors", Runtime.getRuntime().availableProcessors());
      j.put("version", System.getProperty("java.version"));
      return j;
    }

    private void writeReport(double wallS) throws IOException {
      Properties p = new Properties();
      try (InputStream in = Main.class.getResourceAsStream("/conformance.properties")) {
        p.load(in);
      }
      Path table = Path.of(w.tablePath).toAbsolutePath();
      Map<String, Object> r = new LinkedHashMap<>();
      r.put("release", p.getProperty("hudi.version"));
      r.put("flink", p.getProperty("flink.version"));
      r.put("table_type", w.tableType);
      r.put("writers", w.writers);
      r.put("checkpoints", w.checkpoints);
      r.put("options", options);
      r.put("wall_s", wallS);
      long firstEmit = RunState.FIRST_EMIT_MS.get();
      r.put("first_emit_ms", firstEmit > 0 ? firstEmit : null);
      // what the write phase cost the JVM whatever else runs on the machine: CPU (every thread) and
      // GC time at the first record and when each commit was seen
      r.put("first_emit_cpu_ms", firstEmit > 0 ? RunState.FIRST_EMIT_CPU_NS.get() / 1_000_000 : null);
      r.put("first_emit_gc_ms", firstEmit > 0 ? RunState.FIRST_EMIT_GC_MS.get() : null);
      r.put("jvm", jvm());
      long sourcesRunning = RunState.SOURCES_RUNNING_MS.get();
      r.put("sources_running_ms", sourcesRunning > 0 ? sourcesRunning : null);
      r.put("instants", TimelineReport.instants(table, ".hoodie", ""));
      r.put("metadata_table_instants",
          TimelineReport.instants(table, ".hoodie/metadata/.hoodie", ".hoodie/metadata/"));
      List<Map<String, Object>> cps = new ArrayList<>();
      for (int k = 1; k <= w.checkpoints; k++) {
        Map<String, Object> c = new LinkedHashMap<>();
        c.put("id", k);
        c.put("completed_ms", RunState.CHECKPOINT_COMPLETED_MS.get((long) k));
        c.put("commit_completed_ms", k <= commitSeen.size() ? commitSeen.get(k - 1)[1] : null);
        long[] cost = k <= costOrder.size() ? commitCost.get(costOrder.get(k - 1)) : null;
        c.put("commit_cpu_ms", cost != null ? cost[0] / 1_000_000 : null);
        c.put("commit_gc_ms", cost != null ? cost[1] : null);
        cps.add(c);
      }
      r.put("checkpoints_detail", cps);
      r.put("fs_calls", CallTotals.total());
      r.put("fs_calls_by_checkpoint", CallTotals.byCheckpoint(commitSeen, w.checkpoints));
      r.put("fs_callers", FsCallLog.callers());
      r.put("scenario", w.scenario);
      r.put("job_status", jobStatus);
      r.put("failovers", RunState.ATTEMPTS.get());
      r.put("crashes", new ArrayList<>(RunState.CRASHES));
      r.put("late_notices", new ArrayList<>(RunState.LATE_NOTICES));
      r.put("expected_commits", expectedCommits);
      r.put("blocked", stalls.blocked());
      r.put("error", error);
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(out.toFile(), r);
    }
  }
}
