-- gold/messages' statuses moved from as_of {before} to {after} when a run has nothing else
-- to write (a quiet hour, an explicit --as-of): only the rows whose status crosses
-- ({crosses}: sql/rules/crosses.sql) are updated. A run with new records carries these
-- rows in its MERGE instead (as_of.crossed), so that the table is rewritten once.
UPDATE {target}
SET status = {status}
WHERE {crosses}
