-- Why not correlated: the messages and subscriptions of `explanations`, by kind and reason.
SELECT concat(kind, ' · ', reason) AS label, count(*) AS n
FROM explanations GROUP BY kind, reason ORDER BY n DESC, label
