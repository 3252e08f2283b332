"""The real Hudi beside the lab: Hudi's own Flink writer, run by the ``conformance/`` harness (Java,
a Flink MiniCluster) on the records a lab run wrote, and the two runs compared part by part."""
