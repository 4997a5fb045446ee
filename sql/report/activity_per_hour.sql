-- Per hour, all tenants: messages published, correlations, expired unmatched (every hour, 0 when none).
WITH h AS (SELECT hour, sum(published) AS published, sum(correlations) AS correlations,
                  sum(expired_unmatched) AS expired FROM hourly_activity GROUP BY hour)
SELECT date_format(x.hour, {time}) AS hour, coalesce(h.published, 0) AS published,
       coalesce(h.correlations, 0) AS correlations, coalesce(h.expired, 0) AS expired
FROM (SELECT explode(sequence(min(hour), max(hour), INTERVAL 1 HOUR)) AS hour FROM h) x
LEFT JOIN h ON h.hour = x.hour ORDER BY x.hour
