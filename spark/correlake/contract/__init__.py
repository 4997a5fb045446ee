"""The data contract: landing lines, table schemas, quarantine reasons."""
