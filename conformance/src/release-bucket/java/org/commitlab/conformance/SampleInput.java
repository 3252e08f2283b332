package org.commitlab.conformance;

import org.apache.hudi.common.model.HoodieKey;
import org.apache.hudi.sink.partitioner.BucketIndexPartitioner;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Writes a small lab-style input directory for trying the harness by hand: records routed to write
 * tasks by Hudi's own BucketIndexPartitioner (so the forward edge gives every task the buckets
 * Hudi would give it), keys repeating across rounds (upserts).
 *
 * <p>Usage: {@code java -cp conformance-hudi-R.jar org.commitlab.conformance.SampleInput DIR
 * COPY_ON_WRITE|MERGE_ON_READ [writers=2] [checkpoints=3] [records_per_round=50] [buckets=4] [keys=160]}
 */
public final class SampleInput {

  private SampleInput() {}

  public static void main(String[] args) throws IOException {
    Path dir = Path.of(args[0]).toAbsolutePath();
    String tableType = args[1];
    int writers = args.length > 2 ? Integer.parseInt(args[2]) : 2;
    int checkpoints = args.length > 3 ? Integer.parseInt(args[3]) : 3;
    int perRound = args.length > 4 ? Integer.parseInt(args[4]) : 50;
    int buckets = args.length > 5 ? Integer.parseInt(args[5]) : 4;
    int keys = args.length > 6 ? Integer.parseInt(args[6]) : 160;
    BucketIndexPartitioner<HoodieKey> partitioner = new BucketIndexPartitioner<>(buckets, "key");
    List<List<List<String>>> rows = new ArrayList<>();
    for (int t = 0; t < writers; t++) {
      List<List<String>> rounds = new ArrayList<>();
      for (int k = 0; k < checkpoints; k++) {
        rounds.add(new ArrayList<>());
      }
      rows.add(rounds);
    }
    int n = 0;
    for (int k = 1; k <= checkpoints; k++) {
      for (int i = 0; i < perRound * writers; i++, n++) {
        int id = (n * 7) % keys;
        String key = String.format("k%04d", id);
        String partition = "p" + (id % 3);
        int task = partitioner.partition(new HoodieKey(key, partition), writers);
        rows.get(task).get(k - 1).add(String.format(
            "{\"key\":\"%s\",\"partition\":\"%s\",\"ts\":%d,\"payload\":\"r%d-%d\"}", key, partition, n, k, i));
      }
    }
    StringBuilder rounds = new StringBuilder("[");
    for (int t = 0; t < writers; t++) {
      rounds.append(t == 0 ? "[" : ", [");
      for (int k = 1; k <= checkpoints; k++) {
        String rel = "task-" + t + "/round-" + k + ".jsonl";
        Files.createDirectories(dir.resolve("task-" + t));
        Files.write(dir.resolve(rel), rows.get(t).get(k - 1));
        rounds.append(k == 1 ? "" : ", ").append('"').append(rel).append('"');
      }
      rounds.append(']');
    }
    rounds.append(']');
    String workload = "{\"table_path\": \"" + dir.resolve("table") + "\", \"table_name\": \"t\", "
        + "\"table_type\": \"" + tableType + "\", \"writers\": " + writers + ", \"checkpoints\": " + checkpoints
        + ", \"checkpoint_interval_ms\": 1000, \"num_buckets\": " + buckets + ", \"record_key\": \"key\", "
        + "\"precombine\": \"ts\", \"partition_field\": \"partition\", \"schema\": ["
        + "{\"name\": \"key\", \"type\": \"string\"}, {\"name\": \"partition\", \"type\": \"string\"}, "
        + "{\"name\": \"ts\", \"type\": \"long\"}, {\"name\": \"payload\", \"type\": \"string\"}], "
        + "\"hudi_options\": {}, \"rounds\": " + rounds + "}\n";
    Files.writeString(dir.resolve("workload.json"), workload);
    System.out.println(dir.resolve("workload.json") + ": " + n + " records, "
        + Math.min(n, keys) + " distinct keys");
  }
}
