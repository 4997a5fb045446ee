"""The integration tier's fixtures: Airflow's home and DAGs, the small demo its runs
compare with, the session's RabbitMQ node, Spark on the S3 server, a Spark standalone
cluster. (The session's SparkSession, driver, demo lake and S3 server: tests/conftest.py.)"""

import os
import subprocess

import pytest
from support.airflow_settings import AIRFLOW_BIN, AIRFLOW_PASSWORD, airflow_env


# -- Airflow (test_airflow_*.py, test_driver.py) -----------------------------------------
# Package-scoped (this folder is a package): the environment they set is undone when the
# tier ends, before the next one runs.
@pytest.fixture(scope="package")
def airflow_home(tmp_path_factory):
    """A fresh, migrated AIRFLOW_HOME (SQLite) with the project's dags/, the DAG serialized,
    user admin / AIRFLOW_PASSWORD, the signing keys of `make airflow`; set in this process's
    environment before Airflow is imported, until the tier ends."""
    import json

    from correlake.interfaces import airflow_local

    home = tmp_path_factory.mktemp("airflow_home")
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({"admin": AIRFLOW_PASSWORD}))
    with pytest.MonkeyPatch.context() as env:
        for name, value in {**airflow_env(home), **airflow_local.signing_keys(home),  # as `make airflow` signs
                            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
                            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords)}.items():
            env.setenv(name, value)
        for command in (["db", "migrate"], ["dags", "reserialize"]):
            subprocess.run([AIRFLOW_BIN, *command], check=True, capture_output=True)
        yield home


@pytest.fixture(scope="package")
def dag_bag(airflow_home):
    """The DAGs of dags/, as Airflow's DagBag loads them."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert bag.import_errors == {}
    assert sorted(bag.dags) == ["correlake_delivery", "correlake_hourly", "correlake_maintenance"]
    return bag


@pytest.fixture(scope="package")
def correlake_dag(dag_bag):
    return dag_bag.dags["correlake_hourly"]


@pytest.fixture(scope="package")
def maintenance_dag(dag_bag):
    return dag_bag.dags["correlake_maintenance"]


@pytest.fixture(scope="package")
def delivery_dag(dag_bag):
    return dag_bag.dags["correlake_delivery"]


SMALL_DEMO = {"hours": 1, "orders_per_hour": 30}  # the landing of the Airflow tests' runs


@pytest.fixture(scope="session")
def small_demo(spark, tmp_path_factory):
    """The SMALL_DEMO landing and the lake of one `correlake run` over it, in this process:
    (landing, lake). Read only: the driver's and the Airflow tests compare their runs' gold
    with it, and run over that landing into lakes of their own."""
    from correlake.interfaces import cli
    from correlake.samples.demo import write_demo_landing

    root = tmp_path_factory.mktemp("small_demo")
    write_demo_landing(root / "landing", **SMALL_DEMO)
    assert cli.main(["run", "--landing", str(root / "landing"), "--lake", str(root / "lake")]) == 0
    return root / "landing", str(root / "lake")


@pytest.fixture(scope="session")
def small_demo_gold(spark, small_demo):
    """The gold of `correlake run` over the SMALL_DEMO landing (sorted rows): what each
    Airflow run of that landing must give."""
    from support.helpers import sorted_gold

    return sorted_gold(small_demo[1])


@pytest.fixture(scope="package")
def airflow_run(spark, correlake_dag, tmp_path_factory):
    """One successful `dag.test()` run on a small demo landing: (dag run, landing, lake).
    Its tasks run in this process, on the test session's SparkSession; the landing and lake
    stay the Airflow Variables' until the tier ends."""
    from correlake.samples.demo import write_demo_landing

    root = tmp_path_factory.mktemp("airflow_run")
    landing, lake = root / "landing", root / "lake"
    write_demo_landing(landing, **SMALL_DEMO)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW_VAR_CORRELAKE_LANDING", str(landing))
        env.setenv("AIRFLOW_VAR_CORRELAKE_LAKE", str(lake))
        yield correlake_dag.test(), landing, lake


# -- RabbitMQ (test_delivery_rabbitmq.py) -------------------------------------------------
@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory):
    """The test session's throwaway RabbitMQ node (tests/support/brokers.py), stopped at the end."""
    from support.brokers import RabbitNode, rabbitmq_installed

    if not rabbitmq_installed():
        pytest.skip("Debian's rabbitmq-server is not installed (.ci/run installs it)")
    node = RabbitNode(tmp_path_factory.mktemp("rabbitmq"))
    try:
        node.start()
        yield node
    finally:
        node.stop()


# -- S3 (test_s3_storage.py, test_s3_lake.py) -----------------------------------------------
@pytest.fixture(scope="session")
def s3_spark(spark, s3):
    """The test session's SparkSession, its `s3a://` on the `s3` server (runtime/session.use_object_store:
    the session may have started before the server)."""
    from correlake.config import SparkSettings
    from correlake.runtime.jars import s3_jars
    from correlake.runtime.session import use_object_store

    if not s3_jars(SparkSettings()):
        pytest.skip("the JARs of s3a:// are not fetched (make setup-s3)")
    use_object_store(spark)
    return spark


# -- Spark standalone cluster (test_cluster.py) ---------------------------------------------
@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """The test session's throwaway Spark standalone cluster (tests/support/cluster.py): a
    master and two workers of 1 core and 1.5 GB on 127.0.0.1, stopped at the end."""
    from support.cluster import SparkCluster

    cluster = SparkCluster(tmp_path_factory.mktemp("spark_cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
