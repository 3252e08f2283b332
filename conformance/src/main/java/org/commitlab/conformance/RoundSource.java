package org.commitlab.conformance;

import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.source.RichParallelSourceFunction;
import org.apache.flink.table.data.RowData;

import java.util.List;

/**
 * Source subtask t emits the lab's rounds[t] in order: a round under the checkpoint lock, then it
 * waits until its next snapshotState, so each round is exactly the data before one barrier and the
 * next round follows the barrier at once (with buffer timeout 0 it reaches the write task before
 * the checkpoint completes: the deadlock scenario's timing). The rounds emitted are its state: after
 * a failover it resumes with the round after the restored checkpoint's. After the last round it
 * waits until the harness saw Hudi commit every round.
 */
public class RoundSource extends RichParallelSourceFunction<RowData>
    implements CheckpointedFunction, CheckpointListener {

  private static final long serialVersionUID = 1L;

  private final List<List<String>> roundFiles;
  private final Workload.Field[] fields;
  private final boolean preload;
  private volatile boolean running = true;
  private volatile int emittedRounds;
  private volatile int snapshottedRounds = -1;
  private volatile long snapshots;
  private transient ListState<Integer> state;
  private transient List<List<RowData>> loaded; // preload: the rounds still to emit, parsed

  public RoundSource(List<List<String>> roundFiles, Workload.Field[] fields, boolean preload) {
    this.roundFiles = roundFiles;
    this.fields = fields;
    this.preload = preload;
  }

  @Override
  public void run(SourceContext<RowData> ctx) throws Exception {
    int task = getRuntimeContext().getIndexOfThisSubtask();
    RunState.ATTEMPTS.accumulateAndGet(getRuntimeContext().getAttemptNumber(), Math::max);
    List<String> mine = roundFiles.get(task);
    if (preload && getRuntimeContext().getAttemptNumber() == 0) {
      // a throughput run: no subtask emits before every one has parsed its rounds, so the write
      // phase (from the first record) holds no source's preload
      int n = getRuntimeContext().getNumberOfParallelSubtasks();
      if (RunState.SOURCES_RUNNING.incrementAndGet() == n) {
        RunState.SOURCES_RUNNING_MS.set(System.currentTimeMillis());
      }
      while (running && RunState.SOURCES_RUNNING.get() < n) {
        Thread.sleep(1);
      }
    }
    int first = emittedRounds + 1;
    for (int k = first; k <= mine.size() && running; k++) {
      List<RowData> rows = preload ? loaded.set(k - first, null) : Workload.readRows(mine.get(k - 1), fields);
      long before;
      RunState.firstEmit();
      synchronized (ctx.getCheckpointLock()) {
        for (RowData row : rows) {
          ctx.collect(row);
        }
        emittedRounds = k;
        before = snapshots;
      }
      while (running && snapshots == before) {
        Thread.sleep(1);
      }
    }
    while (running && !RunState.released) {
      Thread.sleep(10);
    }
  }

  @Override
  public void cancel() {
    running = false;
  }

  @Override
  public void snapshotState(FunctionSnapshotContext context) throws Exception {
    int task = getRuntimeContext().getIndexOfThisSubtask();
    int rounds = roundFiles.get(task).size();
    if (emittedRounds == snapshottedRounds && emittedRounds < rounds) {
      RunState.ANOMALIES.add("source " + task + ": barrier " + context.getCheckpointId() + " came before round "
          + (emittedRounds + 1) + " was emitted (expected one round per barrier)");
    }
    snapshottedRounds = emittedRounds;
    state.update(List.of(emittedRounds));
    snapshots++;
  }

  @Override
  public void initializeState(FunctionInitializationContext context) throws Exception {
    state = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("rounds", Integer.class));
    if (context.isRestored()) {
      for (Integer r : state.get()) {
        emittedRounds = r;
      }
      snapshottedRounds = emittedRounds;
    }
    // preload: every round parsed while the task initialises (no checkpoint is triggered before
    // every task runs), so reading the input is neither inside the measured write nor between a
    // barrier and its round (the lab's sources hold their rounds in memory too)
    if (preload) {
      List<String> mine = roundFiles.get(getRuntimeContext().getIndexOfThisSubtask());
      loaded = new java.util.ArrayList<>();
      for (int k = emittedRounds + 1; k <= mine.size(); k++) {
        loaded.add(Workload.readRows(mine.get(k - 1), fields));
      }
    }
  }

  @Override
  public void notifyCheckpointComplete(long checkpointId) {
    RunState.CHECKPOINT_COMPLETED_MS.putIfAbsent(checkpointId, System.currentTimeMillis());
  }
}
