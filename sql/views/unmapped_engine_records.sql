-- Which exporter records of a mapped kind take no part in gold (yet), and why? One row per record
-- (contract revision 4): NO_DEFINITION (its process definition is not in the lake yet), NO_ELEMENT (the
-- definition has no element of that id), UNSUPPORTED_ELEMENT (an element of a kind the mapping does not take,
-- or a BPMN refused: silver_engine_definitions.refused says why), RESOURCE_DELETION (a PROCESS DELETED record).
-- A record waiting for its definition leaves this view in the run that brings it. Empty on a lake of the
-- canonical streams.
SELECT partition_id, position, value_type, intent, tenant_id, process_definition_key, element_id, timestamp, why
FROM silver_engine_pending
