-- How far behind is delivery?
-- One row per tenant with events not delivered yet (`delivery_events` not final: PENDING,
-- SENT, AWAITED): how many, on how many ordering keys, how many wait for a retry, the
-- oldest one's correlation time and how long ago that was, and a last error seen.
SELECT tenant_id, count(*) AS waiting, count(DISTINCT ordering_key) AS ordering_keys,
       count_if(status = 'AWAITED') AS awaiting_retry, min(correlated_at) AS oldest_correlated_at,
       unix_timestamp(current_timestamp()) - unix_timestamp(min(correlated_at)) AS oldest_age_s,
       max(last_error) AS a_last_error
FROM delivery_events
WHERE status IN ('PENDING', 'SENT', 'AWAITED')
GROUP BY tenant_id
ORDER BY waiting DESC, tenant_id
