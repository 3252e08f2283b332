"""The table on S3: a real S3-compatible endpoint (moto's server) on loopback.

S3 has no rename, no directories and no create-if-absent, and every operation is an HTTP request
the endpoint can count; these tests run the DFS layer, the message bus and a whole job against it
and read the table back with the official reader over S3.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from runtime.core.dfs import DfsNotFound, open_dfs
from runtime.core.storage import StorageError, check_location, parse_s3_uri, reader_location, redact

BUCKET = "lab"  # the bucket the shared s3 fixture creates (tests/conftest.py)


def _keys(s3, prefix: str) -> list[str]:
    dfs, base = open_dfs(s3.uri(BUCKET, prefix))
    import pyarrow.fs as pafs

    infos = dfs.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File)


def test_s3_uri_options_map_to_pyarrow_and_to_the_reader(s3):
    uri = s3.uri(BUCKET, "some/table")
    loc = parse_s3_uri(uri)
    assert (loc.bucket, loc.path) == (BUCKET, f"{BUCKET}/some/table")
    base, opts = reader_location(uri)
    assert base == f"s3://{BUCKET}/some/table"
    assert opts["aws_endpoint"] == s3.url and opts["aws_allow_http"] == "true"
    assert opts["aws_access_key_id"] == opts["aws_secret_access_key"] == "commitlab"
    assert "secret_key=***" in redact(uri) and "commitlab&" not in redact(uri).split("secret_key")[1]
    with pytest.raises(StorageError, match="unknown option"):
        parse_s3_uri(f"s3://{BUCKET}/t?endpoint=127.0.0.1:1")


def test_dfs_on_s3_writes_in_place_and_the_endpoint_counts_it(s3):
    dfs, base = open_dfs(s3.uri(BUCKET, "dfs-basics"))
    before = s3.counts()
    dfs.write_parquet(f"{base}/p0/f1.parquet", pa.table({"k": [1, 2, 3]}))
    dfs.write_bytes(f"{base}/.hoodie/001.commit", b"{}")
    assert dfs.read_parquet(f"{base}/p0/f1.parquet").num_rows == 3
    assert [e.name for e in dfs.list_dir(f"{base}/p0")] == ["f1.parquet"]
    with pytest.raises(DfsNotFound):
        dfs.read_bytes(f"{base}/.hoodie/002.commit")
    served = s3.counts()
    # no temporary object and no copy: S3 has no rename, the object appears whole on completion
    assert not [k for k in _keys(s3, "dfs-basics") if k.endswith((".tmp", ".inprogress"))]
    assert served["ops"].get("CopyObject", 0) == before["ops"].get("CopyObject", 0)
    assert served["requests"] - before["requests"] >= 6  # one per client operation at least
    dfs.delete(base, recursive=True)
    assert not dfs.exists(f"{base}/p0/f1.parquet")


def test_message_bus_on_s3(s3):
    from runtime.hudi.timeline.dfs_message_bus import MessageClient, MessageDriver

    dfs, base = open_dfs(s3.uri(BUCKET, "bus"))
    driver = MessageDriver(dfs, base)
    client = MessageClient(dfs, base)
    assert client.get_ckp_message(1) is None
    driver.commit_ckp(1, "20260101000000000", "20260101000000001")
    driver.abort_ckp(2)
    assert client.get_ckp_message(1).inflight_instant == "20260101000000001"
    assert client.get_ckp_message(2) is not None and not client.get_ckp_message(2).committed
    MessageDriver(dfs, base)  # a restarted coordinator recreates an empty bus
    assert MessageClient(dfs, base).get_ckp_message(1) is None


def test_missing_bucket_and_unreachable_endpoint_name_the_fix(s3):
    dfs, _ = open_dfs(s3.uri("no-such-bucket", "t"))
    with pytest.raises(StorageError, match="bucket 'no-such-bucket' does not exist"):
        check_location(dfs.fs, s3.uri("no-such-bucket", "t"))
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    from runtime.lab.s3_endpoint import s3_uri

    uri = s3_uri(BUCKET, "t", dead) + "&connect_timeout=1&request_timeout=2"
    dfs, _ = open_dfs(uri)
    with pytest.raises(StorageError, match="cannot reach the S3 endpoint .*endpoint_override"):
        check_location(dfs.fs, uri)
