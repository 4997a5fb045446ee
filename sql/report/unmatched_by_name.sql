-- Unmatched messages: the top 10 names → the processes listening to them.
SELECT concat(name, ' → ', coalesce(nullif(array_join(listening_processes, ', '), ''), 'nothing listens'))
       AS label, count(*) AS n
FROM unmatched_messages GROUP BY 1 ORDER BY n DESC, label LIMIT 10
