-- Subscriptions closed without a message: the top 10 process · message · close reason.
SELECT concat(bpmn_process_id, ' · ', message_name, ' · ', close_reason) AS label, count(*) AS n
FROM subscriptions_closed_without_message GROUP BY 1 ORDER BY n DESC, label LIMIT 10
