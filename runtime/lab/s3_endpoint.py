"""An S3-compatible endpoint on loopback that counts the requests it serves.

Tests and demos need real S3 semantics (no rename, no directories, per-request cost) without an
AWS account: moto's threaded server speaks the S3 protocol over HTTP. This module wraps its WSGI
app in a counter, so a run can report what the *endpoint* served next to what the client-side DFS
layer counted (pyarrow turns one logical operation into several HTTP requests: a listing is paged,
a rename is a copy plus a delete, an ``exists`` is a HEAD and sometimes a LIST).

The counts are served at ``GET /_commitlab/endpoint-stats`` so a job driver in another process can
read them (:func:`fetch_endpoint_counts`). ``moto`` is a test dependency, imported only here.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections import defaultdict
from typing import TYPE_CHECKING, Any, TypedDict, cast

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

STATS_PATH = "/_commitlab/endpoint-stats"
DUMMY_KEY = "commitlab"
DEFAULT_REGION = "us-east-1"


def s3_operation(method: str, path: str, query: str, copy_source: str = "") -> str:
    """A coarse S3 operation name for one HTTP request (what the S3 API would bill)."""
    params = {p.split("=", 1)[0] for p in query.split("&") if p}
    key_part = path.lstrip("/").partition("/")[2]
    if method == "GET":
        if not key_part or "list-type" in params or "prefix" in params or "delimiter" in params:
            return "ListObjects"
        return "GetObject"
    if method == "HEAD":
        return "HeadObject" if key_part else "HeadBucket"
    if method == "PUT":
        if copy_source:
            return "CopyObject"  # what a "rename" costs on S3 (plus the delete)
        if "partNumber" in params:
            return "UploadPart"
        return "PutObject" if key_part else "CreateBucket"
    if method == "POST":
        if "delete" in params:
            return "DeleteObjects"
        if "uploads" in params:
            return "CreateMultipartUpload"
        if "uploadId" in params:
            return "CompleteMultipartUpload"
        return "Post"
    if method == "DELETE":
        return "DeleteObject" if key_part else "DeleteBucket"
    return method


class EndpointCounts(TypedDict):
    """What a counting endpoint served: requests by S3 operation and the bytes each way."""

    requests: int
    ops: dict[str, int]  # PutObject, GetObject, ListObjects, HeadObject, ...: requests
    bytes_in: int
    bytes_out: int


class _Counter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ops: dict[str, int] = defaultdict(int)
        self.bytes_in = 0
        self.bytes_out = 0

    def add(self, op: str, bytes_in: int, bytes_out: int) -> None:
        with self._lock:
            self.ops[op] += 1
            self.bytes_in += bytes_in
            self.bytes_out += bytes_out

    def snapshot(self) -> EndpointCounts:
        with self._lock:
            return {
                "requests": sum(self.ops.values()),
                "ops": dict(self.ops),
                "bytes_in": self.bytes_in,
                "bytes_out": self.bytes_out,
            }


def _counting_app(app: WSGIApplication, counter: _Counter) -> WSGIApplication:
    """WSGI middleware: counts every request by S3 operation and answers the stats path itself."""

    def wrapped(environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        if environ.get("PATH_INFO") == STATS_PATH:
            body = json.dumps(counter.snapshot()).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        op = s3_operation(
            environ.get("REQUEST_METHOD", ""),
            environ.get("PATH_INFO", ""),
            environ.get("QUERY_STRING", ""),
            environ.get("HTTP_X_AMZ_COPY_SOURCE", ""),
        )
        bytes_in = int(environ.get("CONTENT_LENGTH") or 0)
        chunks = list(app(environ, start_response))  # moto answers from memory: small and finite
        counter.add(op, bytes_in, sum(len(c) for c in chunks))
        return chunks

    return wrapped


class S3Endpoint:
    """moto's S3 server on ``host`` (port 0: a free one), counting requests.

    ``with S3Endpoint() as ep: ep.create_bucket("b"); ep.uri("b", "t")`` gives a table URI that
    pyarrow and the job accept.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        try:
            from moto.moto_server.threaded_moto_server import ThreadedMotoServer
        except ImportError as exc:
            raise RuntimeError(
                "the loopback S3 endpoint needs moto: pip install 'moto[server]==5.2.5' "
                "(it is in the test extra: pip install -e '.[test]')"
            ) from exc
        self.counter = _Counter()
        counter = self.counter

        class _Server(ThreadedMotoServer):
            def _server_entry(self) -> None:  # moto's own entry, with the counter around the app
                from moto.moto_server.werkzeug_app import (
                    DomainDispatcherApplication,
                    MotoRequestHandler,
                    create_backend_app,
                )
                from werkzeug.serving import make_server

                app = _counting_app(DomainDispatcherApplication(create_backend_app), counter)

                class _Quiet(MotoRequestHandler):
                    def log_request(self, *args: Any) -> None:  # one line per request is noise
                        pass

                self._server = make_server(self._ip_address, self._port, app, True, request_handler=_Quiet)
                self._server_ready_event.set()
                self._server.serve_forever()

        self._server = _Server(ip_address=host, port=port, verbose=False)
        self.host = host
        self.port = 0

    def start(self) -> S3Endpoint:
        self._server.start()
        self.host, self.port = self._server.get_host_and_port()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> S3Endpoint:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    def uri(self, bucket: str, prefix: str = "") -> str:
        """A pyarrow.fs URI for ``s3://bucket/prefix`` on this endpoint (dummy credentials)."""
        return s3_uri(bucket, prefix, self.endpoint)

    def create_bucket(self, bucket: str) -> None:
        req = urllib.request.Request(f"{self.url}/{bucket}", method="PUT")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def counts(self) -> EndpointCounts:
        return self.counter.snapshot()


def s3_uri(bucket: str, prefix: str, endpoint: str, *, scheme: str = "http", region: str = DEFAULT_REGION) -> str:
    """``s3://bucket/prefix?endpoint_override=host:port&scheme=http&...`` for a non-AWS endpoint."""
    path = f"{bucket}/{prefix.strip('/')}" if prefix.strip("/") else bucket
    return (
        f"s3://{path}?endpoint_override={endpoint}&scheme={scheme}&region={region}"
        f"&access_key={DUMMY_KEY}&secret_key={DUMMY_KEY}"
    )


def fetch_endpoint_counts(endpoint_url: str, timeout: float = 5.0) -> EndpointCounts | None:
    """The request counts a counting endpoint has served so far, or None when the endpoint does
    not serve them (a real S3 service, another S3-compatible server)."""
    try:
        with urllib.request.urlopen(endpoint_url.rstrip("/") + STATS_PATH, timeout=timeout) as resp:
            doc = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return cast(EndpointCounts, doc) if isinstance(doc, dict) and "requests" in doc else None


def diff_counts(before: EndpointCounts, after: EndpointCounts) -> EndpointCounts:
    """What the endpoint served between two snapshots."""
    ops = {k: after["ops"].get(k, 0) - before["ops"].get(k, 0) for k in after["ops"]}
    return {
        "requests": after["requests"] - before["requests"],
        "ops": {k: v for k, v in sorted(ops.items()) if v},
        "bytes_in": after["bytes_in"] - before["bytes_in"],
        "bytes_out": after["bytes_out"] - before["bytes_out"],
    }
