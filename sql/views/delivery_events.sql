-- Where is each delivery event now?
-- One row per `outbox` event with its delivery state (PENDING until a `correlake deliver`
-- pass first sees it): the ordering key, kind, sequence, partition, the correlation's
-- process and time, the status, attempts, last error and when it last changed.
SELECT o.event_id, o.kind, o.tenant_id, o.correlation_key, o.ordering_key, o.message_key, o.bpmn_process_id,
       o.sequence, o.partition,
       CAST(get_json_object(o.payload, '$.correlated_at') AS TIMESTAMP) AS correlated_at,
       coalesce(s.status, 'PENDING') AS status, coalesce(s.attempts, 0) AS attempts,
       s.next_attempt_at, s.last_error, s.updated_at
FROM outbox o LEFT JOIN delivery_state s ON s.event_id = o.event_id
