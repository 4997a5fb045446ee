-- Quarantined lines: the top 10 reason kinds ({reason_kind}: contract/reasons.py).
SELECT {reason_kind} AS label, count(*) AS n FROM quarantine GROUP BY 1
ORDER BY n DESC, label LIMIT 10
