package org.commitlab.conformance;

import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.source.RichParallelSourceFunction;
import org.apache.flink.table.data.RowData;

import java.util.List;

/**
 * Source subtask t emits the lab's rounds[t] in order: round k under the checkpoint lock, then it
 * waits until its snapshotState for checkpoint k was called, so round k is exactly the data before
 * barrier k; after the last round it waits until the harness saw Hudi commit the last checkpoint.
 */
public class RoundSource extends RichParallelSourceFunction<RowData>
    implements CheckpointedFunction, CheckpointListener {

  private static final long serialVersionUID = 1L;

  private final List<List<String>> roundFiles;
  private final Workload.Field[] fields;
  private volatile boolean running = true;
  private volatile int emittedRounds;

  public RoundSource(List<List<String>> roundFiles, Workload.Field[] fields) {
    this.roundFiles = roundFiles;
    this.fields = fields;
  }

  @Override
  public void run(SourceContext<RowData> ctx) throws Exception {
    int task = getRuntimeContext().getIndexOfThisSubtask();
    List<String> mine = roundFiles.get(task);
    for (int k = 1; k <= mine.size() && running; k++) {
      List<RowData> rows = Workload.readRows(mine.get(k - 1), fields);
      synchronized (ctx.getCheckpointLock()) {
        for (RowData row : rows) {
          ctx.collect(row);
        }
        emittedRounds = k;
      }
      while (running && RunState.SNAPSHOTTED.getOrDefault(task, 0L) < k) {
        Thread.sleep(2);
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
  public void snapshotState(FunctionSnapshotContext context) {
    int task = getRuntimeContext().getIndexOfThisSubtask();
    long id = context.getCheckpointId();
    int rounds = roundFiles.get(task).size();
    if (id <= rounds && emittedRounds != id) {
      RunState.ANOMALIES.add("source " + task + ": barrier " + id + " came after round "
          + emittedRounds + " (expected exactly round " + id + ")");
    }
    RunState.SNAPSHOTTED.merge(task, id, Math::max);
  }

  @Override
  public void initializeState(FunctionInitializationContext context) {
    if (context.isRestored()) {
      RunState.ANOMALIES.add("source restored from a checkpoint: the job failed over");
    }
  }

  @Override
  public void notifyCheckpointComplete(long checkpointId) {
    RunState.CHECKPOINT_COMPLETED_MS.putIfAbsent(checkpointId, System.currentTimeMillis());
  }
}
