-- How long did each correlation take: since the message was published, and since the
-- subscription opened? One row per gold/correlations row, in seconds;
-- `since_opened_s` is NULL for START correlations (no subscription).
SELECT c.tenant_id, c.bpmn_process_id, c.message_name, c.subscription_type, c.element_id,
       c.correlation_key, c.message_key, c.process_instance_key,
       c.message_published_at, s.opened_at, c.correlated_at,
       CAST(unix_millis(c.correlated_at) - unix_millis(c.message_published_at) AS DOUBLE) / 1000 AS since_published_s,
       CAST(unix_millis(c.correlated_at) - unix_millis(s.opened_at) AS DOUBLE) / 1000 AS since_opened_s
FROM gold_correlations c
LEFT JOIN gold_subscriptions s
  ON c.subscription_type = 'CATCH' AND s.tenant_id = c.tenant_id
 AND s.element_instance_key = c.element_instance_key AND s.message_name = c.message_name
ORDER BY c.correlated_at, c.message_key, c.bpmn_process_id
