-- How many messages sat in the buffer over time, and how many of them were still waiting
-- for a first correlation? Per tenant and hour (every hour from the first publish to
-- gold's as_of): `buffered` = accepted messages with TTL > 0 published and not yet past
-- their deadline (rule 6), `uncorrelated` = those of them not correlated yet, both at the
-- end of the hour; `peak_buffered` = the most buffered at once within the hour.
WITH accepted AS (
  SELECT m.tenant_id, m.published_at, m.deadline, least(m.deadline, c.first_correlated_at) AS waited_until
  FROM gold_messages m
  LEFT JOIN (SELECT message_key, min(correlated_at) AS first_correlated_at
             FROM gold_correlations GROUP BY message_key) c ON c.message_key = m.message_key
  WHERE m.duplicate_of IS NULL AND {buffered[m.published_at]}  -- buffered from its publish to its deadline
),
as_of AS (SELECT as_of FROM gold_as_of),
hour_starts AS (  -- the level an hour starts with, carried over, counts towards its peak
  SELECT tenant_id, explode(sequence(date_trunc('HOUR', min(published_at)), date_trunc('HOUR', max(a.as_of)),
                                     INTERVAL 1 HOUR)) AS at
  FROM accepted CROSS JOIN as_of a WHERE published_at <= a.as_of GROUP BY tenant_id
),
changes AS (
  SELECT d.tenant_id, d.at, sum(d.d_buffered) AS d_buffered, sum(d.d_uncorrelated) AS d_uncorrelated
  FROM (SELECT tenant_id, published_at AS at, 1 AS d_buffered, 1 AS d_uncorrelated FROM accepted
        UNION ALL SELECT tenant_id, deadline, -1, 0 FROM accepted
        UNION ALL SELECT tenant_id, waited_until, 0, -1 FROM accepted
        UNION ALL SELECT tenant_id, at, 0, 0 FROM hour_starts) d
  CROSS JOIN as_of
  WHERE d.at <= as_of.as_of
  GROUP BY d.tenant_id, d.at
),
levels AS (
  SELECT tenant_id, at, sum(d_buffered) OVER w AS buffered, sum(d_uncorrelated) OVER w AS uncorrelated
  FROM changes
  WINDOW w AS (PARTITION BY tenant_id ORDER BY at ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT tenant_id, date_trunc('HOUR', at) AS hour, max_by(buffered, at) AS buffered,
       max_by(uncorrelated, at) AS uncorrelated, max(buffered) AS peak_buffered
FROM levels GROUP BY 1, 2
