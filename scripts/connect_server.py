"""A Spark Connect server with correlake's session (`runtime/session.get_spark`: its
settings, the Delta JARs of the set-up, Delta's SQL extension and catalog), for
`connect_compare.py`. Not run by CI.

    CORRELAKE_CONNECT_PORT=15002 SPARK_CONNECT_AUTHENTICATE_TOKEN=… \
        .venv/bin/python scripts/connect_server.py

Listens on 127.0.0.1 at CORRELAKE_CONNECT_PORT and serves only clients that send the
token of SPARK_CONNECT_AUTHENTICATE_TOKEN (from the environment, never an argument: the
process's command line is readable by every local user). Prints `ready` once it serves;
stops on SIGTERM or SIGINT."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading


def main() -> None:
    from correlake.config import SparkSettings
    from correlake.runtime.session import get_spark

    settings = SparkSettings()
    connect = {"spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
               "spark.connect.grpc.binding.address": "127.0.0.1",
               "spark.connect.grpc.binding.port": os.environ["CORRELAKE_CONNECT_PORT"],
               "spark.connect.authenticate.token": os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"]}
    spark = get_spark(dataclasses.replace(settings, extra_conf={**settings.extra_conf, **connect}))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    print("ready", flush=True)
    stop.wait()
    spark.stop()


if __name__ == "__main__":
    main()
