"""The lake: landing discovery, Delta tables, lock, journal, restatement, maintenance, catalog."""
