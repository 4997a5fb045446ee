-- Restate the rows of a set of (tenant_id, correlation_key)s in one table.
-- {changes} holds, for those keys only, every row that is not in the table as it must
-- now be (_op = 'U') and the key of every row that must go (_op = 'D'); rows that are
-- already right are not in it (lake/restate.py), so the files that hold them are not
-- rewritten. {match} ends with those keys' ranges in literals (lake/restate.bounds), so
-- that Delta reads only the target's files whose statistics may hold them.
MERGE INTO {target} AS t
USING {changes} AS s
ON {match}
WHEN MATCHED AND s._op = 'D' THEN DELETE
WHEN MATCHED AND s._op = 'U' THEN UPDATE SET {assignments}
WHEN NOT MATCHED AND s._op = 'U' THEN INSERT ({columns}) VALUES ({values})
