"""The delivery tests' order checks (tests/support/delivery_helpers.py) look at each ordering key,
(tenant_id, correlation_key), apart: on crafted lists, a check by correlation_key alone
fails a correct delivery and passes a wrong one; these do neither."""

from support.delivery_helpers import by_key_alone, by_ordering_key, not_in_sequence, out_of_order

# Two tenants' events of one correlation key, each tenant's in order: t2's line came in a
# later run (or another partition's consumer got ahead), so by key alone it reads 1 2 3 1 2.
CORRECT = [("t1", "k", 1), ("t1", "k", 2), ("t1", "k", 3), ("t2", "k", 1), ("t2", "k", 2)]
# t1's second event recorded as t2's (a tenant mix-up): by key alone it reads 1 2 3.
MIXED_UP = [("t1", "k", 1), ("t2", "k", 2), ("t1", "k", 3)]


def test_rows_are_grouped_by_tenant_and_key():
    assert by_ordering_key(CORRECT) == {("t1", "k"): [1, 2, 3], ("t2", "k"): [1, 2]}
    assert by_ordering_key(by_key_alone(CORRECT)) == {("*", "k"): [1, 2, 3, 1, 2]}


def test_a_correct_delivery_passes_which_by_key_alone_would_fail():
    assert out_of_order(CORRECT) == {} and not_in_sequence(CORRECT) == {}
    assert out_of_order(by_key_alone(CORRECT)) == {("*", "k"): [1, 2, 3, 1, 2]}
    assert not_in_sequence(by_key_alone(CORRECT)) == {("*", "k"): [1, 2, 3, 1, 2]}


def test_a_wrong_delivery_fails_which_by_key_alone_would_pass():
    assert not_in_sequence(MIXED_UP) == {("t1", "k"): [1, 3], ("t2", "k"): [2]}
    assert not_in_sequence(by_key_alone(MIXED_UP)) == {}


def test_out_of_order_and_not_in_sequence():
    resent = [("t", "k", 1), ("t", "k", 2), ("t", "k", 2), ("t", "k", 3)]  # a resend: in order, not once
    assert out_of_order(resent) == {} and not_in_sequence(resent) == {("t", "k"): [1, 2, 2, 3]}
    overtaken = [("t", "k", 2), ("t", "k", 1), ("u", "k", 1)]
    assert out_of_order(overtaken) == not_in_sequence(overtaken) == {("t", "k"): [2, 1]}
    assert not_in_sequence([("t", "k", 2)]) == {("t", "k"): [2]}  # the first missing
