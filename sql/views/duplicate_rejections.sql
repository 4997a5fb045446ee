-- How often is a re-sent message rejected as a duplicate (rule 7), per tenant and name?
-- `messages`: distinct message records; `with_message_id`: those carrying an id;
-- `rejection_rate` = rejected / messages.
SELECT tenant_id, name, count(*) AS messages, count(message_id) AS with_message_id,
       count_if(status = 'REJECTED_DUPLICATE') AS rejected,
       count_if(status = 'REJECTED_DUPLICATE') / count(*) AS rejection_rate
FROM gold_messages
GROUP BY tenant_id, name
ORDER BY tenant_id, name
