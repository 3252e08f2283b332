"""``commitlab s3-endpoint``: a loopback S3 endpoint that counts the requests it serves (for
demos; a run against it records them in ``result.json`` as ``dfs_endpoint``)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from rich.console import Console

from runtime.cli.exits import ExitCode
from runtime.cli.options import CommandParser, add_config_option


def cmd_s3_endpoint(args: argparse.Namespace, console: Console) -> int:
    from runtime.lab.s3_endpoint import S3Endpoint

    ep = S3Endpoint(args.host, args.port).start()
    for b in args.bucket:
        ep.create_bucket(b)
    print(
        f"S3 endpoint on {ep.url}; e.g. --table '{ep.uri(args.bucket[0] if args.bucket else 'BUCKET', 'table')}'",
        flush=True,
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        ep.stop()
    return ExitCode.OK


def add_command(sub: Any) -> None:
    helptext = "serve a loopback S3 endpoint (moto) that counts its requests, until Ctrl-C"
    p: CommandParser = sub.add_parser("s3-endpoint", help=helptext, description=helptext)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=9000, help="port to listen on (default: 9000)")
    p.add_argument("--bucket", action="append", default=[], help="bucket to create (repeatable; default: none)")
    add_config_option(p, job=False)
    p.set_defaults(func=cmd_s3_endpoint)
