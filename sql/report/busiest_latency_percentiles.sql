-- Latency percentiles of the 12 process · message · type pairs with the most correlations.
SELECT * FROM latency_percentiles ORDER BY correlations DESC, bpmn_process_id, message_name LIMIT 12
