-- Why did events become dead letters? The top 10 status: reason pairs.
SELECT concat(status, ': ', coalesce(reason, '-')) AS label, count(*) AS n FROM dead_letters
GROUP BY 1 ORDER BY n DESC, label LIMIT 10
