"""``commitlab verify`` on an object store it cannot reach: a "cannot reach" message naming the
endpoint and the fix, exit 2, and no traceback (it used to report "not-a-table", then fail with a
DfsError traceback)."""

from __future__ import annotations

import socket

from runtime.cli.command import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once the socket is closed


def test_verify_on_an_unreachable_s3_endpoint_says_so_and_exits_2(capsys):
    port = _closed_port()
    table = f"s3://bucket/t?endpoint_override=127.0.0.1:{port}&scheme=http&connect_timeout=1"
    assert main(["verify", "--table", table]) == 2
    out = capsys.readouterr()
    said = out.out + out.err
    assert "cannot reach" in said and f"http://127.0.0.1:{port}" in said
    assert "endpoint_override" in said  # the fix names the URI's option
    assert "Traceback" not in said and "not-a-table" not in said
