package org.commitlab.conformance;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.table.catalog.CatalogTable;
import org.apache.flink.table.catalog.ObjectIdentifier;
import org.apache.flink.table.catalog.ResolvedSchema;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.types.logical.RowType;
import org.apache.hudi.common.model.HoodieKey;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.configuration.FlinkOptions;
import org.apache.hudi.configuration.OptionsInference;
import org.apache.hudi.configuration.OptionsResolver;
import org.apache.hudi.index.bucket.BucketIdentifier;
import org.apache.hudi.sink.bucket.BucketStreamWriteOperator;
import org.apache.hudi.sink.partitioner.BucketIndexPartitioner;
import org.apache.hudi.sink.utils.Pipelines;
import org.apache.hudi.table.HoodieTableFactory;

import java.io.IOException;
import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * Hudi 0.11 to 0.14's Flink writer as the harness drives it: the bucket index (index.type=BUCKET,
 * BucketStreamWriteOperator), HoodieTableFactory.setupConfOptions(conf, ObjectIdentifier, ...),
 * OptionsInference (0.12+; setupClientId from 0.14). The same methods as release-0.10's.
 */
final class ReleaseApi {

  /** The index the harness writes with in this release. */
  static final String INDEX = "BUCKET";

  private ReleaseApi() {}

  /** index.type=BUCKET, hoodie.bucket.index.num.buckets, hoodie.bucket.index.hash.field=record_key. */
  static void indexOptions(Configuration conf, Workload w) {
    conf.setString(FlinkOptions.INDEX_TYPE, INDEX);
    conf.setInteger(FlinkOptions.BUCKET_INDEX_NUM_BUCKETS, w.numBuckets);
    conf.setString(FlinkOptions.INDEX_KEY_FIELD, w.recordKey);
  }

  /** HoodieTableFactory.setupConfOptions for a table declared with this schema. */
  static void setupConfOptions(Configuration conf, String tableName, CatalogTable table, ResolvedSchema schema)
      throws Exception {
    Method setup = HoodieTableFactory.class.getDeclaredMethod("setupConfOptions", Configuration.class,
        ObjectIdentifier.class, CatalogTable.class, ResolvedSchema.class);
    setup.setAccessible(true);
    setup.invoke(null, conf, ObjectIdentifier.of("default_catalog", "default_database", tableName), table, schema);
  }

  /** What HoodieTableSink does before it builds the pipeline: OptionsInference's sink tasks and client id. */
  static void setupSink(Configuration conf, int writers) throws Exception {
    OptionsInference.setupSinkTasks(conf, writers);
    try {
      OptionsInference.class.getMethod("setupClientId", Configuration.class).invoke(null, conf);
    } catch (NoSuchMethodException e) {
      // before 0.14 there is no client id (one ckp_meta folder per table)
    }
  }

  /**
   * HoodieTableSink's streaming upsert with a bucket index: the edge into bucket_write forward
   * (source subtask t feeds write task t, the lab's routing) or, with {@code hudiRouting}, Hudi's
   * BucketIndexPartitioner; bucket_write in a task of its own; the task-crash scenario's map chained
   * in front of it in that task when {@code crash} is not null. BucketStreamWriteOperator.getFactory
   * is WriteOperatorFactory.instance(conf, new BucketStreamWriteOperator(conf)); LateNotice's
   * factory is that one with the coordinator's completion notices of {@code noticeDelaysMs} late.
   */
  static DataStream<Object> write(Configuration conf, RowType rowType, DataStream<RowData> source,
      CrashInSnapshot<HoodieRecord> crash, boolean hudiRouting, Map<Long, Long> noticeDelaysMs) {
    DataStream<HoodieRecord> records = Pipelines.bootstrap(conf, rowType, source, false, false);
    if (hudiRouting) {
      // Pipelines.hoodieStreamWrite's own edge: a task restarted after a failover loads the file
      // groups of the buckets this partitioner gives it (isBucketToLoad), and only those
      BucketIndexPartitioner<HoodieKey> partitioner = new BucketIndexPartitioner<>(
          conf.getInteger(FlinkOptions.BUCKET_INDEX_NUM_BUCKETS), conf.getString(FlinkOptions.INDEX_KEY_FIELD));
      records = records.partitionCustom(partitioner, (KeySelector<HoodieRecord, HoodieKey>) HoodieRecord::getKey);
    }
    if (crash != null) {
      // the write task's chain starts here: the crash map, then bucket_write
      records = records.map(crash).returns(records.getType()).name("crash_in_snapshot")
          .setParallelism(conf.getInteger(FlinkOptions.WRITE_TASKS)).startNewChain();
    }
    SingleOutputStreamOperator<Object> write = records
        .transform(Pipelines.opName("bucket_write", conf), TypeInformation.of(Object.class),
            LateNotice.factory(conf, new BucketStreamWriteOperator<>(conf), noticeDelaysMs))
        .uid(Pipelines.opUID("bucket_write", conf))
        .setParallelism(conf.getInteger(FlinkOptions.WRITE_TASKS));
    // Hudi's partitionCustom puts bucket_write in a task of its own (its mailbox thread runs
    // processElement and the coordinator's events); the forward edge must not chain it to the source
    return crash != null || hudiRouting ? write : write.startNewChain();
  }

  static boolean needsAsyncCompaction(Configuration conf) {
    return OptionsResolver.needsAsyncCompaction(conf);
  }

  /**
   * How the lab's routing differs from Hudi's BucketIndexPartitioner, which sends a record of
   * bucket b in partition p to task ((hash(p) & MAX) % writers + b) % writers: records on another
   * task, and buckets more than one task writes (each such task opens its own file group). Null
   * when they agree.
   */
  static String routingWarning(Workload w) throws IOException {
    BucketIndexPartitioner<HoodieKey> hudi = new BucketIndexPartitioner<>(w.numBuckets, w.recordKey);
    int keyIdx = w.fieldIndex(w.recordKey);
    int partIdx = w.fieldIndex(w.partitionField);
    long moved = 0;
    long total = 0;
    Map<String, Set<Integer>> tasksOfBucket = new HashMap<>();
    for (int t = 0; t < w.writers; t++) {
      for (String file : w.rounds.get(t)) {
        for (RowData row : Workload.readRows(file, w.fields)) {
          String part = row.isNullAt(partIdx) ? "" : row.getString(partIdx).toString();
          HoodieKey key = new HoodieKey(row.getString(keyIdx).toString(), part);
          moved += hudi.partition(key, w.writers) == t ? 0 : 1;
          total++;
          int bucket = BucketIdentifier.getBucketId(key, w.recordKey, w.numBuckets);
          tasksOfBucket.computeIfAbsent(part + "/" + bucket, b -> new HashSet<>()).add(t);
        }
      }
    }
    long shared = tasksOfBucket.values().stream().filter(ts -> ts.size() > 1).count();
    if (moved == 0 && shared == 0) {
      return null;
    }
    return moved + " of " + total + " records are on another write task than Hudi's BucketIndexPartitioner would"
        + " pick; " + shared + " of " + tasksOfBucket.size()
        + " (partition, bucket) pairs are written by more than one task (a file group per task)";
  }
}
