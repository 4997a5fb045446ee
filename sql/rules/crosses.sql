-- A gold/messages row whose status crosses when as_of moves from the instant {before} to
-- {after} (semantics rule 23, contract gold/as_of): a BUFFERED message whose deadline is
-- now at or before as_of becomes EXPIRED, and back when as_of is set earlier. {status} is
-- the row's status at {after}. The deadline range lets Delta skip every file that holds
-- none of them.
status IN ('BUFFERED', 'EXPIRED') AND ttl_ms > 0
  AND deadline > least({before}, {after}) AND deadline <= greatest({before}, {after})
  AND status <> {status}
