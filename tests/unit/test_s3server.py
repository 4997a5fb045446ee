"""The tests' S3 server (tests/support/s3server.py) keeps S3's conditional writes, through this
process's client (objectstore.client): a create (`If-None-Match: *`) fails on a key that
exists, a replace (`If-Match`) on an ETag that is no longer the key's, and of racing
creates of one key exactly one succeeds."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from correlake.lake import objectstore


def status(error: ClientError) -> int:
    return error.response["ResponseMetadata"]["HTTPStatusCode"]


def test_create_only_if_absent(s3):
    bucket, key = objectstore.split(s3.fresh("create") + "/lock")
    client = objectstore.client()
    client.put_object(Bucket=bucket, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=bucket, Key=key, Body=b"second", IfNoneMatch="*")
    assert status(refused.value) == 412 and refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"first"


def test_replace_only_if_unchanged(s3):
    bucket, key = objectstore.split(s3.fresh("cas") + "/lock")
    client = objectstore.client()
    seen = client.put_object(Bucket=bucket, Key=key, Body=b"v1")["ETag"]
    now = client.put_object(Bucket=bucket, Key=key, Body=b"v2", IfMatch=seen)["ETag"]
    with pytest.raises(ClientError) as lost:  # a writer that saw v1 too comes second
        client.put_object(Bucket=bucket, Key=key, Body=b"v2'", IfMatch=seen)
    assert status(lost.value) == 412
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v2"
    assert client.head_object(Bucket=bucket, Key=key)["ETag"] == now


def test_racing_creates_one_wins(s3):
    bucket, key = objectstore.split(s3.fresh("race") + "/lock")
    client = objectstore.client()

    def create(n: int) -> int:
        try:
            client.put_object(Bucket=bucket, Key=key, Body=str(n).encode(), IfNoneMatch="*")
            return n
        except ClientError as error:
            assert status(error) == 412
            return -1

    with ThreadPoolExecutor(8) as pool:
        won = [n for n in pool.map(create, range(32)) if n >= 0]
    assert len(won) == 1
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == str(won[0]).encode()
