-- gold/messages' statuses moved from the instant {before} to {after} (semantics rule 23,
-- contract gold/as_of): only the messages whose status crosses are updated — a BUFFERED
-- message whose deadline is now at or before as_of becomes EXPIRED, and back when as_of
-- is set earlier; rows a MERGE of the same run already wrote at {after} are left alone.
-- The deadline range lets Delta skip every file that holds none of them.
UPDATE {target}
SET status = {status}
WHERE status IN ('BUFFERED', 'EXPIRED') AND ttl_ms > 0
  AND deadline > least({before}, {after}) AND deadline <= greatest({before}, {after})
  AND status <> {status}
