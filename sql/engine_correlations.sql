-- Keep gold/engine_correlations' row of each (message_key, bpmn_process_id) the first
-- record by (partition_id, position) (contract revision 4, Engine audit): {rows} are a
-- run's rows, one per pair (transforms/engine_audit.py); a pair's row is inserted, or
-- replaced by the row of an earlier record, or by its own record's renamed (its instance's
-- pairing came later). A later record's row changes nothing.
MERGE INTO {target} AS t
USING {rows} AS s
ON t.message_key = s.message_key AND t.bpmn_process_id = s.bpmn_process_id
WHEN MATCHED AND (s.partition_id < t.partition_id OR (s.partition_id = t.partition_id AND s.position <= t.position))
  THEN UPDATE SET *
WHEN NOT MATCHED THEN INSERT *
