"""Key groups: the connected components of the links between keys (`run/backends/spark_scope.components`),
and the key of a message-started instance, which links them."""

from __future__ import annotations

import random

import pytest

from correlake.config import COMPONENTS_ON_DRIVER
from correlake.run.backends.spark_scope import components
from correlake.semantics.start_events import started_message_key, started_message_key_sql


def smallest_of_each_component(edges: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """The reference: (tenant_id, node) -> smallest node of its component, by search."""
    near: dict[tuple[str, str], set] = {}
    for tenant, a, b in edges:
        near.setdefault((tenant, a), set()).add((tenant, b))
        near.setdefault((tenant, b), set()).add((tenant, a))
    roots: dict[tuple[str, str], str] = {}
    for start in near:
        if start in roots:
            continue
        component, todo = {start}, [start]
        while todo:
            for other in near[todo.pop()] - component:
                component.add(other)
                todo.append(other)
        smallest = min(component)[1]
        roots.update(dict.fromkeys(component, smallest))
    return roots


@pytest.mark.parametrize("on_driver_max", [0, COMPONENTS_ON_DRIVER], ids=["spark", "driver"])
def test_components_of_long_chains_trees_and_random_links(spark, on_driver_max):
    """Solved by Spark's rounds and by the driver's union-find: a chain of 2,000 links
    with its keys in random order (one label a round would take 2,000 rounds), a star, a
    random tree and random links, each in its own tenant, the same keys in two tenants,
    and keys beyond ASCII (Spark orders their UTF-8 bytes): every key gets the smallest
    key of its component."""
    rng = random.Random(20261126)
    keys = [f"k{i:05d}" for i in range(2001)]
    chain = rng.sample(keys, len(keys))
    edges = [("chain", chain[i], chain[i + 1]) for i in range(2000)]
    edges += [("star", "k00500", k) for k in keys[:300]]
    edges += [("tree", keys[i], keys[rng.randrange(i)]) for i in range(1, 500)]
    edges += [("random", rng.choice(keys[:400]), rng.choice(keys[:400])) for _ in range(300)]
    edges += [("unicode", "\u00e9", "z"), ("unicode", "\uffff", "\U0001F600"), ("unicode", "z", "\U0001F600")]
    rng.shuffle(edges)
    frame = spark.createDataFrame(edges, "tenant_id string, a string, b string")
    got = {(r["tenant_id"], r["node"]): r["root"] for r in components(frame, on_driver_max).collect()}
    assert got == smallest_of_each_component(edges)
    assert set(got[("chain", k)] for k in keys) == {"k00000"}


def test_the_started_message_key_is_parsed_alike_in_python_and_in_spark_sql(spark):
    """Rule 20's instance key parsed on the driver backend (Python) and on the Spark backend (SQL): Java's
    `$` before a final line terminator, leading zeros, signs, overflow, other forms."""
    keys = ["msg-start:p:12", "msg-start:p:-3", "msg-start:p:012", "msg-start:p:12\n", "msg-start:p:12\r\n",
            "msg-start:p:12\u2028", "msg-start:p:12\n\n", "msg-start:p:12x", "msg-start:p:1:2", "msg-start:12",
            "msg-start:", "msg-start:p:", "msg-start:p:+4", "msg-start:p:9223372036854775807",
            "msg-start:p:-9223372036854775808", "msg-start:p:9223372036854775808", "other:p:1", "p:msg-start:1", None]
    frame = spark.createDataFrame([(k,) for k in keys], "k string")
    in_sql = [r[0] for r in frame.selectExpr(started_message_key_sql("k")).collect()]
    assert [started_message_key(k) for k in keys] == in_sql
    assert in_sql[:5] == [12, -3, 12, 12, 12] and in_sql[-4:] == [None, None, None, None]
