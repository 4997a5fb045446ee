"""Delivery: gold's correlations as events to the services that continue the instances
(the outbox a run writes with gold, and the `correlake deliver` pass that sends it)."""
