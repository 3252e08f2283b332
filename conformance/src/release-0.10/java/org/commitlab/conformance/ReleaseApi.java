package org.commitlab.conformance;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.table.catalog.CatalogTable;
import org.apache.flink.table.catalog.ResolvedSchema;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.types.logical.RowType;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.configuration.FlinkOptions;
import org.apache.hudi.sink.StreamWriteOperator;
import org.apache.hudi.sink.partitioner.BucketAssignFunction;
import org.apache.hudi.sink.utils.Pipelines;
import org.apache.hudi.table.HoodieTableFactory;
import org.apache.hudi.util.StreamerUtil;

import java.lang.reflect.Method;
import java.util.Map;

/**
 * Hudi 0.10's Flink writer as the harness drives it (hudi-flink-bundle_2.11 0.10.1, the bytecode of
 * HoodieTableSink.getSinkRuntimeProvider): no bucket index yet, so the Flink-state index
 * (Pipelines.hoodieStreamWrite: keyBy record key -> bucket_assigner -> keyBy file id ->
 * stream_write), and Hudi's routing, not the lab's; HoodieTableFactory.setupConfOptions(conf,
 * String, ...); no OptionsInference (the write tasks are the environment's parallelism); no
 * CkpMetadata (the writers read the timeline and wait for the coordinator's CommitAckEvent).
 */
final class ReleaseApi {

  /** The index the harness writes with in this release. */
  static final String INDEX = "FLINK_STATE";

  private ReleaseApi() {}

  /** The release's default index (index.type exists from 0.11): the buckets are Hudi's to pick. */
  static void indexOptions(Configuration conf, Workload w) {
  }

  static void setupConfOptions(Configuration conf, String tableName, CatalogTable table, ResolvedSchema schema)
      throws Exception {
    Method setup = HoodieTableFactory.class.getDeclaredMethod("setupConfOptions", Configuration.class,
        String.class, CatalogTable.class, ResolvedSchema.class);
    setup.setAccessible(true);
    setup.invoke(null, conf, tableName, table, schema);
  }

  static void setupSink(Configuration conf, int writers) {
    conf.setInteger(FlinkOptions.WRITE_TASKS, writers);
  }

  /**
   * HoodieTableSink's streaming upsert (Pipelines.bootstrap then hoodieStreamWrite at the
   * environment's parallelism; Hudi's keyBy routes whatever {@code hudiRouting} says); the task-crash
   * scenario's map runs after the bootstrap, before Hudi's keyBy (the write tasks are behind a shuffle).
   */
  static DataStream<Object> write(Configuration conf, RowType rowType, DataStream<RowData> source,
      CrashInSnapshot<HoodieRecord> crash, boolean hudiRouting, Map<Long, Long> noticeDelaysMs) {
    int parallelism = source.getExecutionConfig().getParallelism();
    DataStream<HoodieRecord> records = Pipelines.bootstrap(conf, rowType, parallelism, source, false, false);
    if (crash != null) {
      records = records.map(crash).returns(records.getType()).name("crash_in_snapshot").setParallelism(parallelism);
    }
    // Pipelines.hoodieStreamWrite of 0.10.1 (its bytecode), with LateNotice's factory for
    // StreamWriteOperator.getFactory (the same WriteOperatorFactory, its coordinator's notices late)
    String table = conf.getString(FlinkOptions.TABLE_NAME);
    return records
        .keyBy(HoodieRecord::getRecordKey)
        .transform("bucket_assigner", TypeInformation.of(HoodieRecord.class),
            new KeyedProcessOperator<>(new BucketAssignFunction<>(conf)))
        .uid("uid_bucket_assigner_" + table)
        .setParallelism(conf.getOptional(FlinkOptions.BUCKET_ASSIGN_TASKS).orElse(parallelism))
        .keyBy(record -> record.getCurrentLocation().getFileId())
        .transform("hoodie_stream_write", TypeInformation.of(Object.class),
            LateNotice.factory(conf, new StreamWriteOperator<>(conf), noticeDelaysMs))
        .uid("uid_hoodie_stream_write" + table)
        .setParallelism(conf.getInteger(FlinkOptions.WRITE_TASKS));
  }

  static boolean needsAsyncCompaction(Configuration conf) {
    return StreamerUtil.needsAsyncCompaction(conf);
  }

  /** Hudi's own keyBy routes the records: nothing to compare. */
  static String routingWarning(Workload w) {
    return null;
  }
}
