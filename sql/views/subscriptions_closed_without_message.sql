-- Which subscriptions closed without taking a message, and why? One row per closed
-- gold/subscriptions row with no correlation: `close_reason` SIBLING_CORRELATED (another
-- branch or a sibling took a message), ELEMENT_LEFT or INSTANCE_ENDED; `open_s` = how
-- long it was open.
SELECT tenant_id, bpmn_process_id, element_id, element_type, message_name, correlation_key,
       process_instance_key, element_instance_key, close_reason, opened_at, closed_at,
       CAST(unix_millis(closed_at) - unix_millis(opened_at) AS DOUBLE) / 1000 AS open_s
FROM gold_subscriptions
WHERE closed_at IS NOT NULL AND correlation_count = 0
ORDER BY closed_at, tenant_id, element_instance_key, message_name
