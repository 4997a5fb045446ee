-- Which messages waited behind the start-event lock (rules 19-21), for how long, and how
-- did the wait end? One row per message and process: the message was published while an
-- instance of that process, started by another message with the same (non-empty) key, was
-- active, and the process's latest deployment then had a start event for its name.
-- `outcome`: STARTED (an instance once the lock was released), CAUGHT (by a subscription
-- of the process later), WAITING (still buffered) or EXPIRED; `waited_s` runs to the
-- correlation, else to the deadline or gold's as_of.
WITH starters AS (
  -- each message that can meet the lock, once per process it would start: the process's
  -- latest deployment before it in the order has a start event for its name (rules 18-19;
  -- at one instant, workflow events come before messages, rule 2)
  SELECT tenant_id, bpmn_process_id, correlation_key, message_name, message_key, published_at, ttl_ms, deadline,
         as_of
  FROM (SELECT m.tenant_id, d.bpmn_process_id, m.correlation_key, m.name AS message_name, m.message_key,
               m.published_at, m.ttl_ms, m.deadline, a.as_of,
               array_contains(d.message_start_events, m.name) AS starts,
               row_number() OVER (PARTITION BY m.message_key, d.bpmn_process_id
                                  ORDER BY d.deployed_at DESC, d.position DESC) AS latest
        FROM gold_messages m
        CROSS JOIN gold_as_of a
        JOIN silver_deployments d
          ON d.tenant_id = m.tenant_id
         AND d.deployed_at <= m.published_at
        WHERE m.duplicate_of IS NULL AND m.correlation_key <> '')
  WHERE latest = 1 AND starts
),
instances AS (  -- started on publish: ordered among the messages of its instant by position
  SELECT i.*, c.message_published_at = i.started_at AS started_on_publish
  FROM gold_message_started_instances i
  JOIN gold_correlations c ON c.message_key = i.message_key AND c.bpmn_process_id = i.bpmn_process_id
                          AND c.subscription_type = 'START'
),
blocked AS (
  SELECT m.*, i.process_instance_key AS lock_holder, i.ended_at AS lock_released_at
  FROM starters m
  JOIN instances i
    ON i.tenant_id = m.tenant_id AND i.bpmn_process_id = m.bpmn_process_id
   AND i.correlation_key = m.correlation_key AND i.message_key <> m.message_key
   AND (i.started_at < m.published_at
        OR (i.started_at = m.published_at AND (NOT i.started_on_publish OR i.message_key < m.message_key)))
   AND (i.ended_at IS NULL OR i.ended_at > m.published_at)
)
SELECT b.tenant_id, b.bpmn_process_id, b.correlation_key, b.message_name, b.message_key, b.published_at,
       b.lock_holder, b.lock_released_at, c.correlated_at,
       CASE WHEN c.subscription_type = 'START' THEN 'STARTED'
            WHEN c.subscription_type = 'CATCH' THEN 'CAUGHT'
            WHEN {buffered[b.as_of]} THEN 'WAITING'  -- still in the buffer (rule 6)
            ELSE 'EXPIRED' END AS outcome,
       CAST(unix_millis(coalesce(c.correlated_at, least(b.deadline, b.as_of))) - unix_millis(b.published_at)
            AS DOUBLE) / 1000 AS waited_s
FROM blocked b
LEFT JOIN gold_correlations c ON c.message_key = b.message_key AND c.bpmn_process_id = b.bpmn_process_id
WHERE c.correlated_at IS NULL OR c.correlated_at > b.published_at
