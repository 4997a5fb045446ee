"""S3-compatible object storage: a landing or a lake at `s3a://BUCKET/PREFIX`, and how each
client reaches it from one place (`config.S3Settings`): Spark through hadoop-aws (`s3a`),
delta-rs through its storage options, and this process's own reads and conditional writes
through boto3. Credentials are never set here: every client reads AWS's environment."""

from __future__ import annotations

import functools
import re
from urllib.parse import urlsplit

from correlake.config import S3Settings

_URI = re.compile(r"s3a?://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<key>.*))?")


def is_uri(location: str) -> bool:
    """Whether `location` names object storage (`s3a://` or `s3://`) rather than a folder."""
    return str(location).startswith(("s3a://", "s3://"))


def split(uri: str) -> tuple[str, str]:
    """(bucket, key) of an `s3a://` URI, the key without a trailing slash; ValueError if it is not one."""
    match = _URI.fullmatch(uri)
    if match is None:
        raise ValueError(f"{uri!r} is not an s3a://BUCKET/PATH URI")
    return match["bucket"], (match["key"] or "").strip("/")


def hadoop_conf(settings: S3Settings | None = None) -> dict[str, str]:
    """hadoop-aws's settings (Spark's `spark.hadoop.` ones without the prefix) for the endpoint."""
    settings = settings or S3Settings()
    conf = {"fs.s3a.endpoint.region": settings.region}
    if settings.endpoint:  # a server of one's own (MinIO, Ceph, a test's): path-style requests
        conf |= {"fs.s3a.endpoint": settings.endpoint, "fs.s3a.path.style.access": "true",
                 "fs.s3a.connection.ssl.enabled": str(urlsplit(settings.endpoint).scheme == "https").lower()}
    return conf


def storage_options(settings: S3Settings | None = None) -> dict[str, str]:
    """delta-rs's storage options for the endpoint (its commits are conditional puts)."""
    settings = settings or S3Settings()
    options = {"AWS_REGION": settings.region}
    if settings.endpoint:
        options |= {"AWS_ENDPOINT_URL": settings.endpoint,
                    "AWS_ALLOW_HTTP": str(urlsplit(settings.endpoint).scheme == "http").lower()}
    return options


@functools.cache
def _client(endpoint: str | None, region: str):
    import boto3  # the [s3] extra: only a lake or landing in object storage needs it
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, region_name=region,
                        config=Config(s3={"addressing_style": "path" if endpoint else "auto"},
                                      retries={"max_attempts": 3, "mode": "standard"}))


def client():
    """This process's S3 client for the configured endpoint."""
    settings = S3Settings()
    return _client(settings.endpoint, settings.region)
