"""Sample landings: the demo world and synthetic benchmark workloads."""
