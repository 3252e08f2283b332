"""A whole job on S3: a real S3-compatible endpoint (moto's server) on loopback, read back over S3."""

from __future__ import annotations

import json
import os

BUCKET = "lab"  # the bucket the shared s3 fixture creates (tests/conftest.py)


def _keys(s3, prefix: str) -> list[str]:
    import pyarrow.fs as pafs

    from runtime.core.dfs import open_dfs

    dfs, base = open_dfs(s3.uri(BUCKET, prefix))
    infos = dfs.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File)


def test_commitlab_run_on_s3_is_exactly_once_and_reports_endpoint_requests(s3, ray_session, tmp_path):
    from runtime.cli import main

    uri = s3.uri(BUCKET, "cli-run/table")
    out = tmp_path / "out"
    rc = main(
        [
            "run",
            "--source",
            "generator",
            "--protocol",
            "message-bus",
            "--writers",
            "2",
            "--checkpoints",
            "3",
            "--records",
            "3000",
            "--bucket-flush-rows",
            "300",
            "--table",
            uri,
            "--out",
            str(out),
            "--quiet",
            "--job-timeout",
            "90",
        ]
    )
    result = json.loads((out / "result.json").read_text())
    assert rc == 0, result.get("error")
    # the official reader read the table over S3 (storage options from the URI)
    assert result["exactly_once"]["verified"] is True
    assert result["checkpoints"]["completed"] == 3 and len(result["commits"]) == 3
    assert result["table"].endswith("secret_key=***")  # the secret key is not written out
    served = result["dfs_endpoint"]
    client_ops = sum(n for ops in result["dfs_ops"].values() for n in ops.values())
    assert served["requests"] >= client_ops > 0
    assert served["ops"].get("CopyObject", 0) == 0  # nothing renamed on S3
    assert {"PutObject", "GetObject", "ListObjects"} <= set(served["ops"])
    keys = _keys(s3, "cli-run/table")
    assert any(k.endswith(".parquet") for k in keys)
    assert not [k for k in keys if k.endswith((".tmp", ".inprogress"))]
    assert os.path.exists(out / "timeline.png")
