-- The engine and correlake: the first rows of `engine_differences`, by tenant, message and process.
SELECT * FROM engine_differences ORDER BY tenant_id, message_key, bpmn_process_id LIMIT 20
