"""The Kafka model: a single-partition control topic with Kafka's semantics. Imports runtime.hudi and below."""
