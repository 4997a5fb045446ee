-- Names whose messages carry an id: the top 10 by duplicate rejection rate.
SELECT * FROM duplicate_rejections WHERE with_message_id > 0
ORDER BY rejection_rate DESC, tenant_id, name LIMIT 10
