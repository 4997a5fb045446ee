"""The long-lived Spark driver: its transport, client, server, warm-up, the kept driver, the class archive build."""
