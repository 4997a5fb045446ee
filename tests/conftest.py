import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("CORRELAKE_SHUFFLE_PARTITIONS", "2")
# No driver kept behind by the tests' runs (driver/kept.py): they run in their own
# process or on the session's driver (`served`); test_driver.py starts a kept one itself.
os.environ["CORRELAKE_KEEP_DRIVER"] = "0"
# Object storage is the test session's S3 server only (the `s3` fixture), with its test
# credentials, never a developer's: set before any JVM starts (hadoop-aws reads AWS's
# environment variables, as boto3 and delta-rs do).
for _name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
              "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "CORRELAKE_S3_ENDPOINT"):
    os.environ.pop(_name, None)
os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                   "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull})


@pytest.fixture(scope="session", autouse=True)
def allowed_root(tmp_path_factory):
    """The Airflow DAGs' Variables may name the test session's folders (CORRELAKE_ALLOWED_ROOT;
    its default, CORRELAKE_HOME, holds none of them)."""
    os.environ["CORRELAKE_ALLOWED_ROOT"] = str(tmp_path_factory.getbasetemp().resolve())


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test session (Delta from the local JARs)."""
    from correlake.runtime.session import get_spark

    session = get_spark()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def demo_run(spark, tmp_path_factory):
    """One `correlake demo --hours 1 --deliver` (the README's main job, and its delivery to the
    example webhook receiver): (its folder, exit code, its output). test_demo.py checks that
    output; the analyst tests read its lake (demo_lake)."""
    import contextlib
    import io

    from correlake.interfaces import cli

    root = tmp_path_factory.mktemp("demo").resolve()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["demo", "--dir", str(root), "--hours", "1", "--deliver"])
    return root, code, out.getvalue()


@pytest.fixture(scope="session")
def demo_lake(demo_run):
    """The lake of one real pipeline run over an hour of the demo landing (the analyst tests read it)."""
    root, code, out = demo_run
    assert code == 0, out
    return str(root / "lake")


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """The test session's long-lived driver (`correlake serve`): (socket, log file). Child
    processes that run the pipeline call it (CORRELAKE_DRIVER) rather than start a JVM each."""
    from helpers import start_driver

    process, socket, log = start_driver(tmp_path_factory.mktemp("driver"))
    yield socket, log
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    assert log.read_text().rstrip().endswith("correlake driver: stopped by SIGTERM")
    assert not socket.exists() and not socket.with_name("driver.sock.key").exists()


# -- Airflow (tests/test_airflow_*.py) -------------------------------------------------
AIRFLOW_PASSWORD = "correlake-test"
AIRFLOW_BIN = str(Path(sys.executable).with_name("airflow"))


def airflow_env(home: Path) -> dict[str, str]:
    """Airflow settings of a test home: this repo's dags/, no example DAGs."""
    return {"AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).resolve().parents[1] / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory):
    """A fresh, migrated AIRFLOW_HOME (SQLite) with the project's dags/, the DAG serialized,
    user admin / AIRFLOW_PASSWORD, the signing keys of `make airflow`; set in this process's
    environment before Airflow is imported."""
    from correlake.interfaces import airflow_local

    home = tmp_path_factory.mktemp("airflow_home")
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({"admin": AIRFLOW_PASSWORD}))
    os.environ.update({
        **airflow_env(home),
        **airflow_local.signing_keys(home),  # as `make airflow` signs
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
    })
    for command in (["db", "migrate"], ["dags", "reserialize"]):
        subprocess.run([AIRFLOW_BIN, *command], check=True, capture_output=True)
    return home


@pytest.fixture(scope="session")
def dag_bag(airflow_home):
    """The DAGs of dags/, as Airflow's DagBag loads them."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert bag.import_errors == {}
    assert sorted(bag.dags) == ["correlake_delivery", "correlake_hourly", "correlake_maintenance"]
    return bag


@pytest.fixture(scope="session")
def correlake_dag(dag_bag):
    return dag_bag.dags["correlake_hourly"]


@pytest.fixture(scope="session")
def maintenance_dag(dag_bag):
    return dag_bag.dags["correlake_maintenance"]


@pytest.fixture(scope="session")
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
    from helpers import sorted_gold

    return sorted_gold(spark, small_demo[1])


@pytest.fixture(scope="session")
def airflow_run(spark, correlake_dag, tmp_path_factory):
    """One successful `dag.test()` run on a small demo landing: (dag run, landing, lake).
    Its tasks run in this process, on the test session's SparkSession."""
    from correlake.samples.demo import write_demo_landing

    root = tmp_path_factory.mktemp("airflow_run")
    landing, lake = root / "landing", root / "lake"
    write_demo_landing(landing, **SMALL_DEMO)
    os.environ.update({"AIRFLOW_VAR_CORRELAKE_LANDING": str(landing), "AIRFLOW_VAR_CORRELAKE_LAKE": str(lake)})
    return correlake_dag.test(), landing, lake


# -- No skips CI cannot see: with CORRELAKE_FORBID_SKIPS=1 (.ci/run) a skip is a failure --
def _forbid_skip(report):
    if os.environ.get("CORRELAKE_FORBID_SKIPS") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped ({reason}), and CORRELAKE_FORBID_SKIPS=1 forbids skips: install what it needs"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    return _forbid_skip((yield))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    return _forbid_skip((yield))


# -- RabbitMQ (tests/integration/test_delivery_rabbitmq.py) ---------------------------------
@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory):
    """The test session's throwaway RabbitMQ node (tests/brokers.py), stopped at the end."""
    from brokers import RabbitNode, rabbitmq_installed

    if not rabbitmq_installed():
        pytest.skip("Debian's rabbitmq-server is not installed (.ci/run installs it)")
    node = RabbitNode(tmp_path_factory.mktemp("rabbitmq"))
    try:
        node.start()
        yield node
    finally:
        node.stop()


# -- S3 (tests/integration/test_s3_storage.py, tests/unit/test_s3server.py) ------------------
S3_BUCKET = "correlake-test"


class S3:
    """The test session's S3 server: its `endpoint`, the bucket S3_BUCKET, and `fresh(name)`,
    an `s3a://` URI under which nothing was written yet."""

    def __init__(self, server):
        self.server, self.endpoint, self.bucket = server, server.endpoint, S3_BUCKET

    def fresh(self, name: str) -> str:
        import uuid

        return f"s3a://{self.bucket}/{name}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """The test session's S3 server (tests/s3server.py), set as CORRELAKE_S3_ENDPOINT, with
    the bucket S3_BUCKET; stopped at the end."""
    from s3server import S3Server

    from correlake.lake import objectstore

    server = S3Server(tmp_path_factory.mktemp("s3") / "server.log")
    server.start()
    try:
        os.environ["CORRELAKE_S3_ENDPOINT"] = server.endpoint
        objectstore.client().create_bucket(Bucket=S3_BUCKET)
        yield S3(server)
    finally:
        os.environ.pop("CORRELAKE_S3_ENDPOINT", None)
        server.stop()


@pytest.fixture(scope="session")
def s3_spark(spark, s3):
    """The test session's SparkSession, its `s3a://` on the `s3` server (session.use_object_store:
    the session may have started before the server)."""
    from correlake.config import SparkSettings
    from correlake.runtime.jars import s3_jars
    from correlake.runtime.session import use_object_store

    if not s3_jars(SparkSettings()):
        pytest.skip("the JARs of s3a:// are not fetched (make setup-s3)")
    use_object_store(spark)
    return spark


# -- Spark standalone cluster (tests/integration/test_cluster.py) ---------------------------
@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """The test session's throwaway Spark standalone cluster (tests/cluster.py): a master and
    two workers of 1 core and 1.5 GB on 127.0.0.1, stopped at the end."""
    from cluster import SparkCluster

    cluster = SparkCluster(tmp_path_factory.mktemp("spark_cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
