"""The source's count of input bytes, the denominator of a run's write amplification."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from runtime.flink.source import _data_bytes

_ROUND = pa.table(
    {
        "key": [f"key-{i}" for i in range(100)],
        "payload": pa.array(["x" * 32 if i % 7 else None for i in range(100)]),
        "nested": pa.array([{"a": i, "b": [1, 2]} for i in range(100)]),
        "price": pa.array([None if i % 3 == 0 else i / 3 for i in range(100)]),
        "_offset": pa.array(np.arange(100)),
        "_bucket": pa.array(np.arange(100), pa.int32()),
    }
)


@pytest.mark.parametrize(("offset", "rows"), [(0, 100), (3, 10), (13, 50), (99, 1), (50, 0)])
def test_a_batch_counts_arrows_size_of_its_data_columns(offset, rows):
    """A batch is a slice of its round: its data columns' bytes as Arrow sizes the selection
    (nulls, nested values and the slice's own range included; the runtime's columns left out)."""
    batch = _ROUND.slice(offset, rows)
    data = [c for c in batch.column_names if not c.startswith("_")]
    assert _data_bytes(batch) == batch.select(data).nbytes
