-- What would have matched an unexplained message or subscription but for one difference?
-- One row per `explanations` row (`kind`, `tenant_id`, `message_key`, `element_instance_key`,
-- `message_name` as there) and record of the other kind in the lake that differs in one
-- way (`miss`): KEY_CASE_OR_SPACE (same tenant and name, keys equal once trimmed of white
-- space and case folded), NAME_CASE_OR_SPACE (same tenant and key, names equal so) or
-- OTHER_TENANT (same name and key); `other_…` name that record. At most 10 per explained
-- object, the closest in time (publish, opening) first.
WITH objects AS (  -- every message and subscription: its name, key, time, and both folded
  SELECT 'MESSAGE' AS kind, tenant_id, message_key, CAST(NULL AS STRING) AS element_instance_key,
         name, correlation_key, published_at AS at
  FROM gold_messages
  UNION ALL
  SELECT 'SUBSCRIPTION', tenant_id, CAST(NULL AS BIGINT), element_instance_key, message_name, correlation_key,
         opened_at
  FROM gold_subscriptions
),
folded AS (
  SELECT *, lower(regexp_replace(name, '^\\s+|\\s+$', '')) AS name_folded,
         lower(regexp_replace(correlation_key, '^\\s+|\\s+$', '')) AS key_folded
  FROM objects
),
explained AS (
  SELECT e.kind, e.tenant_id, e.message_key, e.element_instance_key, e.message_name,
         o.name, o.correlation_key, o.at, o.name_folded, o.key_folded
  FROM explanations e
  JOIN folded o
    ON o.kind = e.kind AND o.tenant_id = e.tenant_id AND o.message_key <=> e.message_key
   AND o.element_instance_key <=> e.element_instance_key AND o.name = coalesce(e.message_name, o.name)
),
misses AS (
  SELECT x.*, 'KEY_CASE_OR_SPACE' AS miss, o.kind AS other_kind, o.tenant_id AS other_tenant_id, o.name AS other_name,
         o.correlation_key AS other_correlation_key, o.message_key AS other_message_key,
         o.element_instance_key AS other_element_instance_key, o.at AS other_at
  FROM explained x JOIN folded o
    ON o.kind <> x.kind AND o.tenant_id = x.tenant_id AND o.name = x.name AND o.key_folded = x.key_folded
   AND o.correlation_key <> x.correlation_key
  UNION ALL
  SELECT x.*, 'NAME_CASE_OR_SPACE', o.kind, o.tenant_id, o.name, o.correlation_key, o.message_key,
         o.element_instance_key, o.at
  FROM explained x JOIN folded o
    ON o.kind <> x.kind AND o.tenant_id = x.tenant_id AND o.correlation_key = x.correlation_key
   AND o.name_folded = x.name_folded AND o.name <> x.name
  UNION ALL
  SELECT x.*, 'OTHER_TENANT', o.kind, o.tenant_id, o.name, o.correlation_key, o.message_key,
         o.element_instance_key, o.at
  FROM explained x JOIN folded o
    ON o.kind <> x.kind AND o.name = x.name AND o.correlation_key = x.correlation_key AND o.tenant_id <> x.tenant_id
),
ranked AS (
  SELECT *, row_number() OVER (PARTITION BY kind, tenant_id, message_key, element_instance_key, message_name
                            ORDER BY abs(unix_millis(other_at) - unix_millis(at)), other_tenant_id, other_name,
                                     other_correlation_key, other_message_key, other_element_instance_key) AS n
  FROM misses
)
SELECT kind, tenant_id, message_key, element_instance_key, message_name, miss, other_kind, other_tenant_id,
       other_name, other_correlation_key, other_message_key, other_element_instance_key
FROM ranked
WHERE n <= 10
ORDER BY kind, tenant_id, message_key, element_instance_key, message_name, n
