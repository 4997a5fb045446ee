-- The commonest near misses: unexplained messages or subscriptions of one name and key
-- shape (digits as …) whose near miss (`near_misses`) used another name, key or tenant;
-- how many objects each, the 10 commonest.
WITH named AS (
  SELECT n.kind, n.miss, n.other_kind, n.tenant_id, n.other_tenant_id, n.other_name, n.other_correlation_key,
         coalesce(m.name, n.message_name) AS name, coalesce(m.correlation_key, s.correlation_key) AS correlation_key,
         concat_ws('/', n.kind, n.tenant_id, CAST(n.message_key AS STRING), n.element_instance_key,
                   n.message_name) AS object
  FROM near_misses n
  LEFT JOIN gold_messages m ON n.kind = 'MESSAGE' AND m.message_key = n.message_key
  LEFT JOIN gold_subscriptions s
    ON n.kind = 'SUBSCRIPTION' AND s.tenant_id = n.tenant_id AND s.element_instance_key = n.element_instance_key
   AND s.message_name = n.message_name
)
SELECT miss, kind, other_kind, name, regexp_replace(correlation_key, '[0-9]+', '…') AS key_shape,
       other_name, regexp_replace(other_correlation_key, '[0-9]+', '…') AS other_key_shape,
       CASE WHEN miss = 'OTHER_TENANT' THEN tenant_id END AS tenant_id,
       CASE WHEN miss = 'OTHER_TENANT' THEN other_tenant_id END AS other_tenant_id,
       count(DISTINCT object) AS n
FROM named GROUP BY ALL ORDER BY n DESC, miss, name, key_shape LIMIT 10
