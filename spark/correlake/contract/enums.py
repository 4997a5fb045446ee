"""The contract's enumerations (contract.md), each value spelled once for the Python code
(SQL files and the suites of `expectations/` keep their literals)."""

# a workflow event's `type`; ELEMENT_LEFT and INSTANCE_ENDED are close reasons too
PROCESS_DEPLOYED, SUBSCRIPTION_OPENED, ELEMENT_LEFT, INSTANCE_ENDED = EVENT_TYPES = (
    "PROCESS_DEPLOYED", "SUBSCRIPTION_OPENED", "ELEMENT_LEFT", "INSTANCE_ENDED")

# a subscription's `element_type`
INTERMEDIATE_CATCH_EVENT, RECEIVE_TASK, BOUNDARY_EVENT, EVENT_BASED_GATEWAY, EVENT_SUBPROCESS = ELEMENT_TYPES = (
    "INTERMEDIATE_CATCH_EVENT", "RECEIVE_TASK", "BOUNDARY_EVENT", "EVENT_BASED_GATEWAY", "EVENT_SUBPROCESS")

# gold/correlations `subscription_type`
CATCH, START = "CATCH", "START"

# gold/subscriptions `close_reason` (rule 13; and ELEMENT_LEFT, INSTANCE_ENDED: rule 11)
CORRELATED, SIBLING_CORRELATED = "CORRELATED", "SIBLING_CORRELATED"
