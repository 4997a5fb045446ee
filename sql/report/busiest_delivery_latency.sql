-- Correlation to acknowledgement: the 12 process · kind pairs with the most acknowledged.
SELECT * FROM delivery_latency ORDER BY acked DESC, bpmn_process_id, kind LIMIT 12
