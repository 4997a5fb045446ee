-- Why not correlated, per hour: the unexplained messages (by publish) and subscriptions (by
-- opening) of each hour, by reason (every hour from the first to the last, 0 when none).
WITH timed AS (
  SELECT e.reason, coalesce(m.published_at, s.opened_at) AS at
  FROM explanations e
  LEFT JOIN gold_messages m ON e.kind = 'MESSAGE' AND m.message_key = e.message_key
  LEFT JOIN gold_subscriptions s
    ON e.kind = 'SUBSCRIPTION' AND s.tenant_id = e.tenant_id AND s.element_instance_key = e.element_instance_key
   AND s.message_name = e.message_name
),
h AS (SELECT date_trunc('HOUR', at) AS hour, reason, count(*) AS n FROM timed GROUP BY ALL)
SELECT date_format(x.hour, {time}) AS hour, r.reason, coalesce(h.n, 0) AS n
FROM (SELECT explode(sequence(min(hour), max(hour), INTERVAL 1 HOUR)) AS hour FROM h) x
CROSS JOIN (SELECT DISTINCT reason FROM h) r
LEFT JOIN h ON h.hour = x.hour AND h.reason = r.reason
ORDER BY x.hour, r.reason
