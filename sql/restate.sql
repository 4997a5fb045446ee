-- Restate the rows of a set of (tenant_id, correlation_key)s in one table.
-- {changes} holds, for those keys only, every row as it must now be (_op = 'U')
-- and the key of every row that must go (_op = 'D'). Rows that are already right
-- are not rewritten.
MERGE INTO {target} AS t
USING {changes} AS s
ON {match}
WHEN MATCHED AND s._op = 'D' THEN DELETE
WHEN MATCHED AND s._op = 'U' AND NOT ({unchanged}) THEN UPDATE SET {assignments}
WHEN NOT MATCHED AND s._op = 'U' THEN INSERT ({columns}) VALUES ({values})
