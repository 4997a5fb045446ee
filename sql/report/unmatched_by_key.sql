-- Unmatched messages: the top 10 tenant · correlation key pairs, with their names.
SELECT concat(tenant_id, ' · ', correlation_key, ': ', array_join(array_sort(collect_set(name)), ', '))
       AS label, count(*) AS n
FROM unmatched_messages GROUP BY tenant_id, correlation_key ORDER BY n DESC, label LIMIT 10
