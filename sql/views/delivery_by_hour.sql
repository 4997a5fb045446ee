-- How many events of each hour's correlations are delivered, waiting, or dead letters?
-- Counts of `delivery_events` per tenant and hour of `correlated_at`, by status.
SELECT tenant_id, date_trunc('HOUR', correlated_at) AS hour, count(*) AS events,
       count_if(status = 'ACKED') AS acked, count_if(status IN ('PENDING', 'SENT')) AS pending,
       count_if(status = 'AWAITED') AS awaiting_retry, count_if(status = 'CANCELLED') AS cancelled,
       count_if(status = 'EXPIRED') AS expired
FROM delivery_events
GROUP BY ALL
ORDER BY hour, tenant_id
