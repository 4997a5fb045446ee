-- The last 10 runs recorded, the latest first, with their summaries.
SELECT run_id, date_format(started_at, {time}) AS started, date_format(finished_at, {time}) AS finished,
       files, records_read, quarantined, coalesce(date_format(as_of, {time}), '-') AS as_of, summary
FROM runs ORDER BY finished_at DESC LIMIT 10
