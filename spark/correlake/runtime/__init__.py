"""What makes runs fast and long-lived, apart from the pipeline: the Spark session, signals,
memory, threads, code generation, join hints, the JVM class archive."""
