"""Hudi's byte formats and documents, knowing no table (as ``hudi-io`` and the Avro models of
``hudi-common``): Avro schema and encoding, log blocks, HFile, the parquet footer and bloom filter,
Java's HashMap order, the metadata table's records and the timeline's metadata documents."""
