-- How many messages published in each hour never matched, per name and listening process?
-- Counts of `unmatched_messages` per tenant, message name, listening process (NULL: no
-- process listens to the name) and hour of publishing; `keys`: distinct correlation keys.
SELECT u.tenant_id, u.name, p.bpmn_process_id, u.published_hour AS hour,
       count(*) AS expired_messages, count(DISTINCT u.correlation_key) AS keys
FROM unmatched_messages u
LATERAL VIEW OUTER explode(u.listening_processes) p AS bpmn_process_id
GROUP BY ALL
ORDER BY hour, tenant_id, name, bpmn_process_id
