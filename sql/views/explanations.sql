-- Why did a message not correlate, and why did a subscription get no message? One row per
-- gold/messages row and per gold/subscriptions row with correlation_count = 0 (contract
-- revision 3, Explanations): `kind` MESSAGE (`message_key`) or SUBSCRIPTION
-- (`element_instance_key`, `message_name`), and the first `reason` that applies, with the
-- related message and subscription and `gap_ms` where the reason names them (else null).
-- "Matching": the same (tenant_id, name, correlation_key); times are gold's. Ties at one
-- instant go to the smaller element_instance_key or message_key (the larger for "last" and
-- "latest"), of several locked processes to the first bpmn_process_id. No reason applies
-- (null) to a message a sibling kept from the subscription that opened while it was buffered.
WITH unexplained_messages AS (SELECT * FROM gold_messages WHERE correlation_count = 0),
unexplained_subscriptions AS (SELECT * FROM gold_subscriptions WHERE correlation_count = 0),
message_pairs AS (  -- each unmatched message with each matching subscription
  SELECT m.message_key, m.published_at, m.deadline, m.ttl_ms, s.tenant_id, s.element_instance_key,
         s.message_name, s.opened_at, s.closed_at
  FROM unexplained_messages m
  JOIN gold_subscriptions s
    ON s.tenant_id = m.tenant_id AND s.message_name = m.name AND s.correlation_key = m.correlation_key
),
subscription_pairs AS (  -- each unmatched subscription with each matching accepted message
  SELECT s.tenant_id, s.element_instance_key, s.message_name, s.bpmn_process_id, s.opened_at, s.closed_at,
         m.message_key, m.published_at, m.deadline, m.ttl_ms
  FROM unexplained_subscriptions s
  JOIN gold_messages m
    ON m.tenant_id = s.tenant_id AND m.name = s.message_name AND m.correlation_key = s.correlation_key
  WHERE m.duplicate_of IS NULL
),
locked AS (  -- rules 18-19: blocked at its publish by a holder that kept the lock until it left the buffer
  SELECT w.message_key, min_by(i.message_key, w.bpmn_process_id) AS holder
  FROM start_lock_waits w
  JOIN unexplained_messages m ON m.message_key = w.message_key
  JOIN gold_message_started_instances i ON i.tenant_id = w.tenant_id AND i.process_instance_key = w.lock_holder
  WHERE w.lock_released_at IS NULL OR w.lock_released_at >= m.deadline
  GROUP BY w.message_key
),
taken_by_earlier AS (  -- rule 14: a subscription opened while it was buffered took an earlier message
  SELECT p.message_key,
         min_by(struct(p.element_instance_key, c.message_key),
                struct(p.opened_at, p.element_instance_key, c.message_published_at, c.message_key)) AS first
  FROM message_pairs p
  JOIN gold_correlations c
    ON c.subscription_type = 'CATCH' AND c.tenant_id = p.tenant_id
   AND c.element_instance_key = p.element_instance_key AND c.message_name = p.message_name
  WHERE p.opened_at > p.published_at AND {buffered[p.opened_at]}
    AND (c.message_published_at < p.published_at
         OR (c.message_published_at = p.published_at AND c.message_key < p.message_key))
  GROUP BY p.message_key
),
opened_after_deadline AS (  -- rule 6: it had left the buffer when a subscription opened
  SELECT message_key, min_by(struct(element_instance_key, opened_at, deadline),
                             struct(opened_at, element_instance_key)) AS first
  FROM message_pairs WHERE opened_at >= deadline GROUP BY message_key
),
closed_before_publish AS (
  SELECT message_key, max_by(struct(element_instance_key, closed_at, published_at),
                             struct(closed_at, element_instance_key)) AS last
  FROM message_pairs WHERE closed_at <= published_at GROUP BY message_key
),
taken_by_process AS (  -- rules 15, 17: a message it could have had went to its process otherwise
  SELECT p.tenant_id, p.element_instance_key, p.message_name,
         min_by(p.message_key, struct(p.published_at, p.message_key)) AS first
  FROM subscription_pairs p
  LEFT SEMI JOIN gold_correlations c ON c.message_key = p.message_key AND c.bpmn_process_id = p.bpmn_process_id
  WHERE (p.published_at >= p.opened_at AND (p.closed_at IS NULL OR p.published_at < p.closed_at))
     OR (p.published_at < p.opened_at AND {buffered[p.opened_at]})
  GROUP BY p.tenant_id, p.element_instance_key, p.message_name
),
expired_before_open AS (
  SELECT tenant_id, element_instance_key, message_name,
         max_by(struct(message_key, deadline, opened_at), struct(deadline, message_key)) AS last
  FROM subscription_pairs WHERE deadline <= opened_at GROUP BY tenant_id, element_instance_key, message_name
),
published_after_close AS (
  SELECT tenant_id, element_instance_key, message_name,
         min_by(struct(message_key, published_at, closed_at), struct(published_at, message_key)) AS first
  FROM subscription_pairs WHERE published_at >= closed_at GROUP BY tenant_id, element_instance_key, message_name
),
message_reasons AS (
  SELECT 'MESSAGE' AS kind, m.tenant_id, m.message_key, CAST(NULL AS STRING) AS element_instance_key,
         CAST(NULL AS STRING) AS message_name,
         coalesce(
           if(m.duplicate_of IS NOT NULL, struct('DUPLICATE' AS reason,
                                                 m.duplicate_of AS message_key, NULL AS element_instance_key,
                                                 NULL AS gap_ms), NULL),
           if(l.holder IS NOT NULL, struct('START_LOCKED' AS reason,
                                           l.holder AS message_key, NULL AS element_instance_key,
                                           NULL AS gap_ms), NULL),
           if(e.first IS NOT NULL,
              struct('TAKEN_BY_EARLIER' AS reason,
                     e.first.message_key AS message_key, e.first.element_instance_key AS element_instance_key,
                     NULL AS gap_ms), NULL),
           if(m.status = 'BUFFERED', struct('WAITING' AS reason,
                                            NULL AS message_key, NULL AS element_instance_key, NULL AS gap_ms), NULL),
           if(a.first IS NOT NULL,
              struct('SUBSCRIPTION_AFTER_DEADLINE' AS reason,
                     NULL AS message_key, a.first.element_instance_key AS element_instance_key,
                     unix_millis(a.first.opened_at) - unix_millis(a.first.deadline) AS gap_ms), NULL),
           if(b.last IS NOT NULL,
              struct('SUBSCRIPTION_CLOSED_BEFORE' AS reason,
                     NULL AS message_key, b.last.element_instance_key AS element_instance_key,
                     unix_millis(b.last.published_at) - unix_millis(b.last.closed_at) AS gap_ms), NULL),
           if(q.message_key IS NULL, struct('NO_SUBSCRIPTION' AS reason,
                                            NULL AS message_key, NULL AS element_instance_key, NULL AS gap_ms), NULL)
         ) AS why
  FROM unexplained_messages m
  LEFT JOIN locked l ON l.message_key = m.message_key
  LEFT JOIN taken_by_earlier e ON e.message_key = m.message_key
  LEFT JOIN opened_after_deadline a ON a.message_key = m.message_key
  LEFT JOIN closed_before_publish b ON b.message_key = m.message_key
  LEFT JOIN (SELECT DISTINCT message_key FROM message_pairs) q ON q.message_key = m.message_key
),
subscription_reasons AS (
  SELECT 'SUBSCRIPTION' AS kind, s.tenant_id, CAST(NULL AS BIGINT) AS message_key, s.element_instance_key,
         s.message_name,
         coalesce(
           if(s.close_reason = 'SIBLING_CORRELATED', struct('SIBLING_CORRELATED' AS reason,
                                                            NULL AS message_key, NULL AS element_instance_key,
                                                            NULL AS gap_ms), NULL),
           if(t.first IS NOT NULL, struct('TAKEN_BY_PROCESS' AS reason,
                                          t.first AS message_key, NULL AS element_instance_key,
                                          NULL AS gap_ms), NULL),
           if(x.last IS NOT NULL,
              struct('MESSAGE_EXPIRED_BEFORE_OPEN' AS reason,
                     x.last.message_key AS message_key, NULL AS element_instance_key,
                     unix_millis(x.last.opened_at) - unix_millis(x.last.deadline) AS gap_ms), NULL),
           if(s.closed_at IS NULL OR s.closed_at > a.as_of,  -- still open at as_of
              struct('WAITING' AS reason, NULL AS message_key, NULL AS element_instance_key, NULL AS gap_ms), NULL),
           if(c.first IS NOT NULL,
              struct('MESSAGE_AFTER_CLOSE' AS reason,
                     c.first.message_key AS message_key, NULL AS element_instance_key,
                     unix_millis(c.first.published_at) - unix_millis(c.first.closed_at) AS gap_ms), NULL),
           if(q.message_name IS NULL, struct('NO_MESSAGE' AS reason,
                                             NULL AS message_key, NULL AS element_instance_key, NULL AS gap_ms), NULL)
         ) AS why
  FROM unexplained_subscriptions s
  CROSS JOIN gold_as_of a
  LEFT JOIN taken_by_process t USING (tenant_id, element_instance_key, message_name)
  LEFT JOIN expired_before_open x USING (tenant_id, element_instance_key, message_name)
  LEFT JOIN published_after_close c USING (tenant_id, element_instance_key, message_name)
  LEFT JOIN (SELECT DISTINCT tenant_id, element_instance_key, message_name FROM subscription_pairs) q
    USING (tenant_id, element_instance_key, message_name)
)
SELECT kind, tenant_id, message_key, element_instance_key, message_name, why.reason AS reason,
       CAST(why.message_key AS BIGINT) AS related_message_key,
       CAST(why.element_instance_key AS STRING) AS related_element_instance_key, CAST(why.gap_ms AS BIGINT) AS gap_ms
FROM (SELECT * FROM message_reasons UNION ALL SELECT * FROM subscription_reasons)
