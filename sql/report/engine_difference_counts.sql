-- The engine and correlake: the rows of `engine_differences`, by difference and explanation.
SELECT difference, explanation, count(*) AS n
FROM engine_differences GROUP BY difference, explanation ORDER BY difference, explanation NULLS LAST
