-- Which messages expired without ever correlating, and which processes listen to their name?
-- One row per EXPIRED message of gold/messages (accepted, correlated to nothing, its
-- deadline passed by gold's as_of; TTL 0 included). `listening_processes`: the processes
-- of its tenant with a subscription, or a message start event that started an instance,
-- on that message name (empty: nothing listens to the name at all).
WITH listeners AS (
  SELECT tenant_id, message_name, bpmn_process_id FROM gold_subscriptions
  UNION
  SELECT tenant_id, message_name, bpmn_process_id FROM gold_correlations WHERE subscription_type = 'START'
)
SELECT m.tenant_id, m.name, m.correlation_key, m.message_key, m.message_id, m.ttl_ms,
       m.published_at, m.deadline AS expired_at,
       date_trunc('HOUR', m.published_at) AS published_hour,
       date_trunc('HOUR', m.deadline) AS expired_hour,
       array_sort(collect_set(l.bpmn_process_id)) AS listening_processes
FROM gold_messages m
LEFT JOIN listeners l ON l.tenant_id = m.tenant_id AND l.message_name = m.name
WHERE m.status = 'EXPIRED'
GROUP BY ALL
ORDER BY published_at, message_key
