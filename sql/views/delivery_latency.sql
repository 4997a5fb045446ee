-- How long from a correlation to its event's acknowledgement, per process and kind?
-- Count, median, p90, p99 and max of seconds from `correlated_at` to the
-- recorded acknowledgement (approximate percentiles, exact up to 10,000 values), over acknowledged events.
SELECT e.bpmn_process_id, e.kind, count(*) AS acked,
       percentile_approx(seconds, 0.5) AS p50_s, percentile_approx(seconds, 0.9) AS p90_s,
       percentile_approx(seconds, 0.99) AS p99_s, max(seconds) AS max_s
FROM (SELECT bpmn_process_id, kind,
             (unix_millis(updated_at) - unix_millis(correlated_at)) / 1000.0 AS seconds
      FROM delivery_events WHERE status = 'ACKED') e
GROUP BY ALL
ORDER BY bpmn_process_id, kind
