-- Correlations per latency bucket since publish and since the subscription opened (all rows, 0 when none).
WITH buckets AS (  -- upper bounds in seconds; 0 s has a bucket of its own
  SELECT * FROM VALUES (0, 'at once'), (1, '< 1 s'), (2, '1–10 s'), (3, '10 s–1 min'), (4, '1–10 min'),
                       (5, '10 min–1 h'), (6, '≥ 1 h') AS b(bucket, label)
),
measures AS (SELECT * FROM VALUES (0, 'since published'), (1, 'since subscription opened') AS m(measure, name)),
counts AS (
  SELECT measure, CASE WHEN s = 0 THEN 0 WHEN s < 1 THEN 1 WHEN s < 10 THEN 2 WHEN s < 60 THEN 3 WHEN s < 600 THEN 4
                       WHEN s < 3600 THEN 5 ELSE 6 END AS bucket, count(*) AS n
  FROM (SELECT 0 AS measure, since_published_s AS s FROM correlation_latency
        UNION ALL
        SELECT 1, since_opened_s FROM correlation_latency WHERE since_opened_s IS NOT NULL)
  GROUP BY 1, 2
)
SELECT m.name AS measure, b.label, coalesce(c.n, 0) AS n
FROM measures m CROSS JOIN buckets b LEFT JOIN counts c ON c.measure = m.measure AND c.bucket = b.bucket
ORDER BY m.measure, b.bucket
