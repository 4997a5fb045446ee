-- Which events became dead letters, and why?
-- The `delivery_events` CANCELLED (their group, one published message's events, was
-- refused for good) or EXPIRED (not acknowledged within the delivery TTL), with the
-- reason; `correlake deliver --requeue-dead-letters` sends them again.
SELECT event_id, status, last_error AS reason, attempts, updated_at AS since, kind, tenant_id,
       correlation_key, message_key, bpmn_process_id, sequence, correlated_at
FROM delivery_events
WHERE status IN ('CANCELLED', 'EXPIRED')
ORDER BY since, tenant_id, correlation_key, sequence
