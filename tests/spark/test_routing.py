"""Key groups: the connected components of the links between keys (`routing.py`)."""

from __future__ import annotations

import random

from correlake.transforms.key_groups import _components


def smallest_of_each_component(edges: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """The reference: (tenant_id, node) -> smallest node of its component, by union-find."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for tenant, a, b in edges:
        ra, rb = find((tenant, a)), find((tenant, b))
        parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x)[1] for x in list(parent)}


def test_components_of_long_chains_trees_and_random_links(spark):
    """A chain of 2,000 links with its keys in random order (one label a round would take
    2,000 rounds), a star, a random tree and random links, each in its own tenant, and the
    same keys in two tenants: every key gets the smallest key of its component."""
    rng = random.Random(20261126)
    keys = [f"k{i:05d}" for i in range(2001)]
    chain = rng.sample(keys, len(keys))
    edges = [("chain", chain[i], chain[i + 1]) for i in range(2000)]
    edges += [("star", "k00500", k) for k in keys[:300]]
    edges += [("tree", keys[i], keys[rng.randrange(i)]) for i in range(1, 500)]
    edges += [("random", rng.choice(keys[:400]), rng.choice(keys[:400])) for _ in range(300)]
    rng.shuffle(edges)
    frame = spark.createDataFrame(edges, "tenant_id string, a string, b string")
    got = {(r["tenant_id"], r["node"]): r["root"] for r in _components(frame).collect()}
    assert got == smallest_of_each_component(edges)
    assert set(got[("chain", k)] for k in keys) == {"k00000"}
