"""Where the table lives: a local path or any ``pyarrow.fs`` URI, S3 with endpoint options included.

On a cluster the table, the message bus and the state backend must be on storage every node sees,
so ``--table`` takes a URI. S3-compatible endpoints (MinIO, moto, Ceph) need more than pyarrow's
own ``s3://`` URI grammar offers (it has no place for a secret key), so S3 URIs are parsed here::

    s3://bucket/prefix?endpoint_override=host:port&scheme=http&region=us-east-1
                      &access_key=...&secret_key=...

Without ``access_key``/``secret_key`` the usual AWS credential chain applies (``AWS_ACCESS_KEY_ID``
and friends, instance profiles). Every other scheme goes to ``pyarrow.fs.FileSystem.from_uri``.

The official reader (hudi-rs) takes the same location as object_store storage options
(:func:`reader_location`), so the writer and the verifier read one URI.

S3 semantics the runtime relies on (see also ``Dfs.write_bytes``/``write_parquet``): a PUT is
atomic (the object appears whole or not at all) and reads after writes are strongly consistent;
there is no atomic rename and no create-if-absent. The runtime needs neither: every timeline file,
message-bus file and checkpoint has exactly one writer (the coordinator or the job manager), so
files are written in place instead of renamed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pyarrow.fs as pafs

from runtime.core.errors import UserError

S3_OPTIONS = (
    "endpoint_override",
    "scheme",
    "region",
    "access_key",
    "secret_key",
    "allow_bucket_creation",
    "connect_timeout",
    "request_timeout",
)


class StorageError(UserError, IOError):
    """The storage location is malformed or unusable; the message says how to fix it."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str
    options: dict[str, str]

    @property
    def path(self) -> str:
        """The path in pyarrow's S3 namespace: ``bucket/prefix``."""
        return f"{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def endpoint_url(self) -> str | None:
        ep = self.options.get("endpoint_override")
        if not ep:
            return None
        return ep if "://" in ep else f"{self.options.get('scheme', 'https')}://{ep}"


def is_s3(uri: str) -> bool:
    return uri.startswith(("s3://", "s3a://"))


def parse_s3_uri(uri: str) -> S3Location:
    parts = urlsplit(uri)
    if not parts.netloc:
        raise StorageError(f"{uri!r} names no bucket: use s3://BUCKET/PREFIX")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(options) - set(S3_OPTIONS))
    if unknown:
        raise StorageError(f"unknown option(s) {unknown} in {redact(uri)!r}; S3 URIs take {', '.join(S3_OPTIONS)}")
    return S3Location(parts.netloc, parts.path.strip("/"), options)


def redact(uri: str) -> str:
    """The URI without its secret key, for messages and result files."""
    if "secret_key=" not in uri:
        return uri
    head, _, query = uri.partition("?")
    kept = [f"{k}=***" if k == "secret_key" else f"{k}={v}" for k, v in parse_qsl(query, keep_blank_values=True)]
    return f"{head}?{'&'.join(kept)}"


def _s3_filesystem(loc: S3Location) -> pafs.S3FileSystem:
    o = loc.options
    kwargs: dict[str, Any] = {"region": o.get("region") or os.environ.get("AWS_REGION") or "us-east-1"}
    if o.get("endpoint_override"):
        kwargs["endpoint_override"] = o["endpoint_override"]
    if o.get("scheme"):
        kwargs["scheme"] = o["scheme"]
    if o.get("access_key") or o.get("secret_key"):
        if not (o.get("access_key") and o.get("secret_key")):
            raise StorageError(
                "give both access_key and secret_key in the S3 URI, or neither (then the AWS credential chain applies)"
            )
        kwargs["access_key"], kwargs["secret_key"] = o["access_key"], o["secret_key"]
    if o.get("allow_bucket_creation"):
        kwargs["allow_bucket_creation"] = o["allow_bucket_creation"].lower() in ("1", "true", "yes")
    # an endpoint that is down should fail a run in seconds, not after the SDK's long defaults
    kwargs["connect_timeout"] = float(o.get("connect_timeout", 5))
    kwargs["request_timeout"] = float(o.get("request_timeout", 30))
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=3)
    return pafs.S3FileSystem(**kwargs)


def open_filesystem(uri_or_path: str) -> tuple[pafs.FileSystem, str]:
    """The file system and the path inside it for a local path or a URI."""
    if "://" not in uri_or_path:
        return pafs.LocalFileSystem(), os.path.abspath(uri_or_path)
    if is_s3(uri_or_path):
        loc = parse_s3_uri(uri_or_path)
        return _s3_filesystem(loc), loc.path
    fs, path = pafs.FileSystem.from_uri(uri_or_path)
    return fs, path.rstrip("/")


def check_location(fs: pafs.FileSystem, uri: str) -> None:
    """Fails early, with the fix in the message, when an S3 endpoint is unreachable or the bucket
    is missing (otherwise the first role to touch the table fails with an SDK error)."""
    if not is_s3(uri):
        return
    loc = parse_s3_uri(uri)
    where = loc.endpoint_url or "AWS S3"
    try:
        info = fs.get_file_info(loc.bucket)
    except OSError as exc:
        raise StorageError(
            f"cannot reach the S3 endpoint {where} for {redact(uri)!r}: {str(exc).splitlines()[0]}. "
            "Check endpoint_override=host:port and scheme=http|https in the URI, and that the "
            "endpoint is running and reachable from every node."
        ) from exc
    if info.type == pafs.FileType.NotFound:
        raise StorageError(
            f"the bucket {loc.bucket!r} does not exist at {where}: create it first "
            f"(e.g. aws --endpoint-url {where} s3 mb s3://{loc.bucket})."
        )


def reader_location(uri_or_path: str) -> tuple[str, dict[str, str]]:
    """The base URI and storage options the official reader (hudi-rs, object_store) needs."""
    if "://" not in uri_or_path:
        return os.path.abspath(uri_or_path), {}
    if not is_s3(uri_or_path):
        return uri_or_path, {}
    loc = parse_s3_uri(uri_or_path)
    opts: dict[str, str] = {"aws_region": loc.options.get("region") or os.environ.get("AWS_REGION") or "us-east-1"}
    if loc.endpoint_url:
        opts["aws_endpoint"] = loc.endpoint_url
        opts["aws_allow_http"] = str(loc.endpoint_url.startswith("http://")).lower()
        opts["aws_virtual_hosted_style_request"] = "false"  # path style, as pyarrow uses it
    if loc.options.get("access_key"):
        opts["aws_access_key_id"] = loc.options["access_key"]
        opts["aws_secret_access_key"] = loc.options["secret_key"]
    return f"s3://{loc.path}", opts


def endpoint_url(uri: str) -> str | None:
    """The S3 endpoint override of a table URI, if any."""
    return parse_s3_uri(uri).endpoint_url if is_s3(uri) else None
