-- Start-event lock waits by how they ended: how many, median and longest wait.
SELECT outcome, count(*) AS n, percentile_approx(waited_s, 0.5) AS median_s, max(waited_s) AS max_s
FROM start_lock_waits GROUP BY outcome ORDER BY n DESC, outcome
