"""A run: its stages, plan, stores, journalled publish, and the long-lived driver."""
