-- How fast do messages correlate, per process, message name and subscription type?
-- Count, median, p90, p99 and max of `correlation_latency` (seconds; approximate
-- percentiles, exact up to 10,000 values), all tenants together.
SELECT bpmn_process_id, message_name, subscription_type, count(*) AS correlations,
       percentile_approx(since_published_s, 0.5) AS since_published_p50_s,
       percentile_approx(since_published_s, 0.9) AS since_published_p90_s,
       percentile_approx(since_published_s, 0.99) AS since_published_p99_s,
       max(since_published_s) AS since_published_max_s,
       percentile_approx(since_opened_s, 0.5) AS since_opened_p50_s,
       percentile_approx(since_opened_s, 0.9) AS since_opened_p90_s,
       percentile_approx(since_opened_s, 0.99) AS since_opened_p99_s,
       max(since_opened_s) AS since_opened_max_s
FROM correlation_latency
GROUP BY ALL
ORDER BY bpmn_process_id, message_name, subscription_type
