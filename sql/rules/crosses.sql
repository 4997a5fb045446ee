-- A gold/messages row whose status crosses when as_of moves from the instant {before} to
-- {after} (semantics rule 23, contract gold/as_of): a message buffered at the earlier
-- instant and not at the later (sql/rules/buffered.sql) is BUFFERED at one and EXPIRED at
-- the other. {status} is the row's status at {after}. The deadline's upper bound follows
-- from the two, but Spark turns the negation into an OR that file statistics cannot skip
-- with: spelled out, it lets Delta skip every file that holds none of the rows.
status IN ('BUFFERED', 'EXPIRED')
  AND {buffered[least(before, after)]} AND NOT {buffered[greatest(before, after)]}
  AND deadline <= greatest({before}, {after})
  AND status <> {status}
