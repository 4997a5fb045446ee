"""Delta tables in S3-compatible object storage (`s3a://`), on the test session's S3 server
(conftest's `s3`, moto): Spark (hadoop-aws, through session.use_object_store) creates,
appends to, MERGEs and reads a table; delta-rs (objectstore.storage_options) reads the
same table and version; a table delta-rs writes, Spark reads."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from correlake.lake import objectstore

SCHEMA = "id long, v string"


def rows_of(frame) -> list[tuple]:
    return sorted(tuple(row) for row in frame.collect())


@pytest.fixture(scope="module")
def spark_table(s3_spark, s3):
    """A table Spark wrote at a fresh `s3a://` URI: created (version 0), appended to (1),
    MERGEd into (2)."""
    from delta.tables import DeltaTable

    uri = s3.fresh("spark") + "/t"
    s3_spark.createDataFrame([(1, "a"), (2, "b")], SCHEMA).write.format("delta").save(uri)
    s3_spark.createDataFrame([(3, "c")], SCHEMA).write.format("delta").mode("append").save(uri)
    (DeltaTable.forPath(s3_spark, uri).alias("t")
     .merge(s3_spark.createDataFrame([(2, "B"), (4, "d")], SCHEMA).alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    return uri


MERGED = [(1, "a"), (2, "B"), (3, "c"), (4, "d")]


def test_spark_writes_and_reads_a_table_in_object_storage(s3_spark, spark_table):
    assert rows_of(s3_spark.read.format("delta").load(spark_table)) == MERGED
    bucket, key = objectstore.split(spark_table)
    listed = objectstore.client().list_objects_v2(Bucket=bucket, Prefix=f"{key}/_delta_log/")
    commits = sorted(o["Key"].rsplit("/", 1)[1] for o in listed["Contents"] if o["Key"].endswith(".json"))
    assert commits == [f"{n:020d}.json" for n in range(3)]


def test_delta_rs_reads_what_spark_wrote(spark_table):
    table = RsTable(spark_table, storage_options=objectstore.storage_options())
    assert table.version() == 2
    assert sorted(zip(*table.to_pyarrow_table().sort_by("id").to_pydict().values())) == MERGED


def test_spark_reads_what_delta_rs_wrote(s3_spark, s3):
    uri = s3.fresh("delta-rs") + "/t"
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    for rows in ([(1, "a"), (2, "b")], [(3, "c")]):
        write_deltalake(uri, pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema),
                        mode="append", storage_options=objectstore.storage_options())
    assert RsTable(uri, storage_options=objectstore.storage_options()).version() == 1
    assert rows_of(s3_spark.read.format("delta").load(uri)) == [(1, "a"), (2, "b"), (3, "c")]
    [latest] = s3_spark.sql(f"DESCRIBE HISTORY delta.`{uri}` LIMIT 1").select("version").collect()
    assert latest.version == 1
