"""What a process keeps from one run of a lake to the next."""
