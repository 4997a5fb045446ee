"""What a process caches from one run of a lake to the next: the history-key cache (the
analysts' table cache is `lake/table_cache.py`, below the catalog that reads through it)."""
