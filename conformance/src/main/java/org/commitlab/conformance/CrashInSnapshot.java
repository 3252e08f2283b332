package org.commitlab.conformance;

import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;

/**
 * The scenario task-crash: an identity map chained in front of Hudi's write operator, in the same
 * task. Flink snapshots a chain from its tail, so this map's snapshotState runs after the write
 * function flushed and sent its write metadata event, before the task acks the checkpoint (the
 * lab's fault point task.in_snapshot). It throws on subtask {@code task}'s first attempt at the
 * {@code round}-th snapshot that subtask takes (checkpoint ids move on after a failover; rounds
 * do not).
 */
public class CrashInSnapshot<T> extends RichMapFunction<T, T> implements CheckpointedFunction {

  private static final long serialVersionUID = 1L;

  private final int round;
  private final int task;
  private transient int snapshots;

  public CrashInSnapshot(int round, int task) {
    this.round = round;
    this.task = task;
  }

  @Override
  public T map(T value) {
    return value;
  }

  @Override
  public void snapshotState(FunctionSnapshotContext context) {
    snapshots++;
    if (getRuntimeContext().getIndexOfThisSubtask() == task && getRuntimeContext().getAttemptNumber() == 0
        && snapshots == round) {
      RunState.CRASHES.add("write task " + task + " crashed in its snapshot of checkpoint " + context.getCheckpointId());
      throw new IllegalStateException("injected crash in the snapshot of checkpoint " + context.getCheckpointId()
          + " (commitlab conformance --scenario task-crash)");
    }
  }

  @Override
  public void initializeState(FunctionInitializationContext context) {
    snapshots = 0;
  }
}
