-- Delivery events per status ({delivery_statuses}: every status, 0 when none).
SELECT s.status AS label, coalesce(c.n, 0) AS n
FROM VALUES {delivery_statuses} AS s(status)
LEFT JOIN (SELECT status, count(*) AS n FROM delivery_events GROUP BY status) c ON c.status = s.status
ORDER BY n DESC, label
