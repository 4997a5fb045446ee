"""correlake, delivery: one `correlake deliver` pass to the sink of the Airflow Connection
`correlake_webhook` or `correlake_rabbitmq` (docs/delivery.md).

Scheduled on the gold assets the hourly DAG's `publish` updates, so new correlations
leave soon after they are made, and every five minutes for the retries that fall due.
A pass has its own lock: it never waits for a pipeline run, nor a run for it. Thin, as
the other DAG files: nothing of the delivery code is imported here.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, Param, dag

from correlake.config import DELIVERY_MAX_SECONDS, DELIVERY_PARTITIONS
from correlake.interfaces.airflow_dags import DAG_SETTINGS, GOLD_ASSETS, deliver


@dag(
    dag_id="correlake_delivery",
    description="Send gold's correlations as events to a webhook or RabbitMQ, in order per key",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("*/5 * * * *", timezone="UTC"),
                                 assets=GOLD_ASSETS["correlations"]),
    **DAG_SETTINGS,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1),
                  "execution_timeout": timedelta(seconds=4 * DELIVERY_MAX_SECONDS)},
    params={
        "partitions": Param(DELIVERY_PARTITIONS, type="integer", minimum=1,
                            description="Route each ordering key to one of this many partitions."),
        "max_seconds": Param(DELIVERY_MAX_SECONDS, type="number", minimum=1,
                             description="Start no new round of sends after this many seconds."),
    },
    doc_md=__doc__,
)
def correlake_delivery():
    deliver()


correlake_delivery()
