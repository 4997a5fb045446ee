-- What happened in each hour? Per tenant and hour: messages published, rejected as
-- duplicates, correlations (CATCH and START) by `correlated_at`, and messages that expired
-- unmatched by their deadline. Hours with nothing are not rows.
WITH events AS (
  SELECT tenant_id, date_trunc('HOUR', published_at) AS hour, 1 AS published,
         if(status = 'REJECTED_DUPLICATE', 1, 0) AS rejected, 0 AS catch, 0 AS start, 0 AS expired
  FROM gold_messages
  UNION ALL
  SELECT tenant_id, date_trunc('HOUR', correlated_at), 0, 0,
         if(subscription_type = 'CATCH', 1, 0), if(subscription_type = 'START', 1, 0), 0
  FROM gold_correlations
  UNION ALL
  SELECT tenant_id, expired_hour, 0, 0, 0, 0, 1 FROM unmatched_messages
)
SELECT tenant_id, hour, sum(published) AS published, sum(rejected) AS rejected_duplicates,
       sum(catch) + sum(start) AS correlations, sum(catch) AS catch_correlations,
       sum(start) AS start_correlations, sum(expired) AS expired_unmatched
FROM events
GROUP BY tenant_id, hour
ORDER BY hour, tenant_id
