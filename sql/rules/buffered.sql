-- The buffered predicate (semantics rules 6, 7, 23): a message is buffered at the instant
-- {at} exactly when it has a TTL and its deadline lies after {at} (strict: at the deadline
-- it is gone). {ttl_ms} and {deadline} name its columns. The one spelling for the SQL of
-- correlake (status, views, gates); its Python twin is `is_buffered` in
-- `semantics/buffer.py`, and tests/unit/test_buffered.py holds the two equal.
{ttl_ms} > 0 AND {deadline} > {at}
