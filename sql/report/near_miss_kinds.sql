-- Near misses by kind: how many unexplained messages and subscriptions have a near miss of each kind.
SELECT concat('near miss · ', miss) AS label,
       count(DISTINCT concat_ws('/', kind, tenant_id, CAST(message_key AS STRING), element_instance_key,
                                message_name)) AS n
FROM near_misses GROUP BY miss ORDER BY n DESC, label
