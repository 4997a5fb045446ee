"""S3-compatible object storage: a landing or a lake at `s3a://BUCKET/PREFIX`, and how each
client reaches it from one place (`config.S3Settings`): Spark through hadoop-aws (`s3a`),
delta-rs through its storage options, and this process's own reads and conditional writes
through boto3. Credentials are never set here: every client reads AWS's environment."""

from __future__ import annotations

import functools
import io
import re
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from correlake.config import S3Settings

_URI = re.compile(r"s3a?://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<key>.*))?")


def split(uri: str) -> tuple[str, str]:
    """(bucket, key) of an `s3a://` URI, the key without a trailing slash; ValueError if it is not one."""
    match = _URI.fullmatch(uri)
    if match is None:
        raise ValueError(f"{uri!r} is not an s3a://BUCKET/PATH URI")
    return match["bucket"], (match["key"] or "").strip("/")


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


def client(settings: S3Settings | None = None):
    """This process's S3 client for the endpoint of `settings` (else this process's)."""
    settings = settings or S3Settings()
    return _client(settings.endpoint, settings.region)


MISSING = ("NoSuchKey", "404")
REFUSED = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")  # a condition that failed


def failed_with(exc: Exception, *codes: str) -> bool:
    """Whether `exc` is the store's answer with one of these error codes."""
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code")) in codes


def unless(codes: tuple[str, ...], call, **request) -> dict | None:
    """`call(**request)`'s response, or None when the store answers with one of `codes`."""
    try:
        return call(**request)
    except Exception as exc:
        if failed_with(exc, *codes):
            return None
        raise


def age(response: dict) -> float:
    """Seconds since a got object was last written, by the store's clock (its `Date` header):
    no skew with this machine's."""
    now = parsedate_to_datetime(response["ResponseMetadata"]["HTTPHeaders"]["date"])
    return (now - response["LastModified"]).total_seconds()


@dataclass(frozen=True)
class Entry:
    key: str  # the object's full key
    name: str  # its key under the listed prefix (`a/b.jsonl` under `s3a://bucket/landing`)
    size: int
    modified_at: datetime


def listing(uri: str, recursive: bool = True, start_after: str = "") -> list[Entry]:
    """The objects under `uri` (a folder-like prefix), at any depth or only directly in it;
    only the keys after `start_after` if given (the store lists from there: `StartAfter`)."""
    bucket, prefix = split(uri)
    prefix = f"{prefix}/" if prefix else ""
    pages = client().get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, **({} if recursive else {"Delimiter": "/"}),
        **({"StartAfter": start_after} if start_after else {}))
    return [Entry(item["Key"], item["Key"][len(prefix):], item["Size"], item["LastModified"]) for page in pages
            for item in page.get("Contents", [])]


def exists(uri: str) -> bool:
    """Whether any object lies under `uri`."""
    bucket, prefix = split(uri)
    return bool(client().list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/" if prefix else "", MaxKeys=1)
                .get("KeyCount"))


def delete_prefix(uri: str) -> None:
    """Delete every object under `uri`."""
    bucket, _ = split(uri)
    keys = [{"Key": entry.key} for entry in listing(uri)]
    for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
        client().delete_objects(Bucket=bucket, Delete={"Objects": keys[start:start + 1000], "Quiet": True})


def why(exc: Exception) -> str:
    """What went wrong, in one line (the store's error code and message, or the client's)."""
    error = getattr(exc, "response", {}).get("Error", {})
    return f"{error.get('Code', '')} {error.get('Message', '')}".strip() if error else str(exc)


class _Body(io.RawIOBase):
    """An object's body as a raw stream (what io.BufferedReader reads lines from)."""

    def __init__(self, body):
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._body.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._body.close()
        super().close()


def open_object(uri: str, buffer_size: int, settings: S3Settings | None = None) -> io.BufferedReader:
    """The object at `uri`, streamed as it is read; FileNotFoundError if it is gone."""
    bucket, key = split(uri)
    got = unless(MISSING, client(settings).get_object, Bucket=bucket, Key=key)
    if got is None:
        raise FileNotFoundError(uri)
    return io.BufferedReader(_Body(got["Body"]), buffer_size=buffer_size)
