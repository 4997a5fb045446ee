-- Where do correlake and the engine disagree? One row per (tenant_id, message_key,
-- bpmn_process_id) where gold/correlations and gold/engine_correlations differ (contract
-- revision 4, Engine audit): `difference` ONLY_ENGINE, ONLY_CORRELAKE or OTHER_TARGET (both
-- correlated the message to the process, to another instance or element instance), each
-- side's instance, element instance and time (null on the side that has none), the
-- message's name and key from gold/messages, and `explanation`: for ONLY_ENGINE,
-- AFTER_DEADLINE (the engine correlated at or after the message's deadline), else the
-- message's reason in `explanations`; for ONLY_CORRELAKE of a START, LOCK_OTHER_TENANT (the
-- engine then held an instance of the process, started by a message of the same non-empty
-- key in another tenant and not ended: its lock is blind to tenants); else null. Empty on a
-- lake of the canonical streams (no exporter records: no engine to compare with).
WITH pairs AS (
  SELECT coalesce(c.tenant_id, e.tenant_id) AS tenant_id, coalesce(c.message_key, e.message_key) AS message_key,
         coalesce(c.bpmn_process_id, e.bpmn_process_id) AS bpmn_process_id,
         CASE WHEN c.message_key IS NULL THEN 'ONLY_ENGINE'
              WHEN e.message_key IS NULL THEN 'ONLY_CORRELAKE'
              WHEN NOT (c.process_instance_key <=> e.process_instance_key)
                OR NOT (c.element_instance_key <=> e.element_instance_key) THEN 'OTHER_TARGET' END AS difference,
         c.subscription_type AS gold_subscription_type, c.correlation_key AS gold_correlation_key,
         c.process_instance_key AS gold_process_instance_key, c.element_instance_key AS gold_element_instance_key,
         c.correlated_at AS gold_correlated_at, e.process_instance_key AS engine_process_instance_key,
         e.element_instance_key AS engine_element_instance_key, e.correlated_at AS engine_correlated_at
  FROM (SELECT * FROM gold_correlations WHERE EXISTS (SELECT 1 FROM bronze_engine_records)) c
  FULL OUTER JOIN gold_engine_correlations e
    ON e.tenant_id = c.tenant_id AND e.message_key = c.message_key AND e.bpmn_process_id = c.bpmn_process_id
),
differences AS (SELECT * FROM pairs WHERE difference IS NOT NULL),
instance_ends AS (  -- the mapped ends of the instances the engine started
  SELECT tenant_id, process_instance_key, min(timestamp) AS ended_at
  FROM silver_workflow_events
  WHERE type = 'INSTANCE_ENDED' AND process_instance_key LIKE 'msg-start:%'
  GROUP BY tenant_id, process_instance_key
),
locked_by_other_tenant AS (  -- rule 19's refinement: the engine's start lock is blind to tenants
  SELECT DISTINCT d.tenant_id, d.message_key, d.bpmn_process_id
  FROM differences d
  JOIN gold_engine_correlations o
    ON o.subscription_type = 'START' AND o.bpmn_process_id = d.bpmn_process_id
   AND o.correlation_key = d.gold_correlation_key AND o.tenant_id <> d.tenant_id
   AND o.correlated_at <= d.gold_correlated_at
  LEFT JOIN instance_ends x ON x.tenant_id = o.tenant_id AND x.process_instance_key = o.process_instance_key
  WHERE d.difference = 'ONLY_CORRELAKE' AND d.gold_subscription_type = 'START' AND d.gold_correlation_key <> ''
    AND (x.ended_at IS NULL OR x.ended_at > d.gold_correlated_at)
)
SELECT d.tenant_id, d.message_key, d.bpmn_process_id, m.name AS message_name, m.correlation_key, d.difference,
       d.gold_process_instance_key, d.gold_element_instance_key, d.gold_correlated_at,
       d.engine_process_instance_key, d.engine_element_instance_key, d.engine_correlated_at,
       CASE WHEN d.difference = 'ONLY_ENGINE' THEN
                 CASE WHEN d.engine_correlated_at >= m.deadline THEN 'AFTER_DEADLINE' ELSE x.reason END
            WHEN l.message_key IS NOT NULL THEN 'LOCK_OTHER_TENANT' END AS explanation
FROM differences d
LEFT JOIN gold_messages m ON m.tenant_id = d.tenant_id AND m.message_key = d.message_key
LEFT JOIN explanations x ON x.kind = 'MESSAGE' AND x.tenant_id = d.tenant_id AND x.message_key = d.message_key
LEFT JOIN locked_by_other_tenant l
  ON l.tenant_id = d.tenant_id AND l.message_key = d.message_key AND l.bpmn_process_id = d.bpmn_process_id
