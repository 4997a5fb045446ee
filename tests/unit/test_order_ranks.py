"""semantics/order.py: the ranks at one instant (semantics rule 2; contract revision 4, *Mapping*:
in a lake of exporter records, deployments and opens, then messages, then ends)."""

from correlake.semantics import order
from correlake.semantics.order import ELEMENT_LEFT, INSTANCE_ENDED, MESSAGE_PUBLISHED, PROCESS_DEPLOYED, SUBSCRIPTION_OPENED


def test_canonical_ranks_put_every_workflow_event_before_messages():
    assert [order.rank(k) for k in (PROCESS_DEPLOYED, SUBSCRIPTION_OPENED, ELEMENT_LEFT, INSTANCE_ENDED,
                                    MESSAGE_PUBLISHED)] == [0, 0, 0, 0, 1]


def test_exporter_ranks_put_ends_after_messages():
    assert [order.rank(k, ends_last=True) for k in (PROCESS_DEPLOYED, SUBSCRIPTION_OPENED, MESSAGE_PUBLISHED,
                                                    ELEMENT_LEFT, INSTANCE_ENDED)] == [0, 0, 1, 2, 2]


def test_a_record_sorts_by_the_rank_it_carries():
    """An engine input record's `rank` column (gold.engine_input) decides, as on Spark's path."""
    def record(kind, position, ends_last):
        return {order.TIME: 5, "kind": kind, order.POSITION: position, order.GROUP_POSITION: position,
                order.RANK: order.rank(kind, ends_last)}

    for ends_last, first in ((False, ELEMENT_LEFT), (True, MESSAGE_PUBLISHED)):
        rows = [record(MESSAGE_PUBLISHED, 1, ends_last), record(ELEMENT_LEFT, 9, ends_last)]
        assert min(rows, key=order.record_sort_key)["kind"] == first
    deployed = order.deployment_sort_key({order.TIME: 5, order.POSITION: 100})
    assert deployed < order.record_sort_key(record(MESSAGE_PUBLISHED, 1, True))
