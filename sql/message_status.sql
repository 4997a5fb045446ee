-- A message's status at the instant {as_of} (semantics rule 23). An expression over a row
-- of gold/messages; used when gold rows are built and when statuses are refreshed.
CASE
  WHEN duplicate_of IS NOT NULL THEN 'REJECTED_DUPLICATE'
  WHEN correlation_count > 0 THEN 'CORRELATED'
  WHEN {buffered[as_of]} THEN 'BUFFERED'
  ELSE 'EXPIRED'
END
