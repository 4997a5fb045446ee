-- Messages in the buffer at the end of each hour, and those not correlated yet; all tenants.
SELECT date_format(hour, {time}) AS label, sum(buffered) AS buffered, sum(uncorrelated) AS uncorrelated
FROM buffered_backlog GROUP BY hour ORDER BY hour
