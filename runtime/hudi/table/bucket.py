"""Hudi's bucket index (``BucketIdentifier.getBucketId``), where the writer side finds it.

The rule is defined once, in :mod:`runtime.data.bucket` (the data plane, below this package in
the layers, computes each record's bucket with it); this module re-exports it for Hudi-side code.
Source: Apache Hudi 0.11 - 1.0, ``hudi-client-common/.../index/bucket/BucketIdentifier.java``.
"""

from __future__ import annotations

from runtime.data.bucket import bucket_column, bucket_ids, bucket_of, java_string_hash

__all__ = ["bucket_column", "bucket_ids", "bucket_of", "java_string_hash"]
