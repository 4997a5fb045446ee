"""Delivery's ordering key (contract revision 3): the line a correlation's events keep
their order in is `(tenant_id, ordering_key)`, `ordering_key` being the correlation key,
or `#<message_key>` when that is empty (an empty key relates nothing: each such message
starts its own instance, semantics rule 20). A non-empty key that reads the same shares
that line, which adds order and never removes it. The rule in Python and its Spark twin
(a test holds them equal)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

EMPTY_KEY_PREFIX = "#"
ORDERING = ("tenant_id", "ordering_key")  # an ordering key's columns


def ordering_key(correlation_key: str, message_key: int) -> str:
    return correlation_key if correlation_key else f"{EMPTY_KEY_PREFIX}{message_key}"


def ordering_key_column(correlation_key: Column, message_key: Column) -> Column:
    """The Spark twin of `ordering_key`."""
    return F.when(correlation_key == F.lit(""), F.concat(F.lit(EMPTY_KEY_PREFIX), message_key.cast("string"))
                  ).otherwise(correlation_key)


def may_share_a_line(correlation_key: str) -> bool:
    """Whether a correlation of this key may share its line with another key's: an empty
    key, or one that reads as an empty key's line."""
    return correlation_key == "" or correlation_key.startswith(EMPTY_KEY_PREFIX)


def may_share_a_line_column(correlation_key: Column) -> Column:
    """The Spark twin of `may_share_a_line`."""
    return (correlation_key == F.lit("")) | correlation_key.startswith(EMPTY_KEY_PREFIX)
