"""The ordering key's partition: stable, spread, and in range."""

from collections import Counter

from correlake.delivery.events import key_hash, partition_of


def test_partition_is_stable_and_in_range():
    assert key_hash("<default>", "order-1") == key_hash("<default>", "order-1")
    assert all(0 <= partition_of("t", f"k{i}", 8) < 8 for i in range(100))
    assert partition_of("<default>", "order-1", 8) == key_hash("<default>", "order-1") % 8


def test_partitions_spread_keys():
    counts = Counter(partition_of("<default>", f"key-{i}", 8) for i in range(8000))
    assert len(counts) == 8 and min(counts.values()) > 800
