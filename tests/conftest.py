"""What every tier shares: the test session's environment (`pytest_configure`), the rules
that CI forbids skips and fewer tests than a floor, and the session's services that more
than one tier uses: its SparkSession, its driver, the demo's run and lake, the S3 server.
A fixture of one tier is in that tier's conftest.py; the tests' helper modules are in
`tests/support/`."""

import os
import signal

import pytest


def pytest_configure(config):
    """The session's environment, set before any test module is imported and any JVM starts;
    as it was again at the end. Two shuffle partitions; no driver kept behind by the tests'
    runs (driver/kept.py: they run in their own process or on the session's driver,
    `served`; test_driver.py starts a kept one itself). Object storage is the session's S3
    server only (the `s3` fixture), with its test credentials, never a developer's
    (hadoop-aws reads AWS's environment variables, as boto3 and delta-rs do)."""
    env = pytest.MonkeyPatch()
    config.add_cleanup(env.undo)
    if "CORRELAKE_SHUFFLE_PARTITIONS" not in os.environ:
        env.setenv("CORRELAKE_SHUFFLE_PARTITIONS", "2")
    env.setenv("CORRELAKE_KEEP_DRIVER", "0")
    for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
                 "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "CORRELAKE_S3_ENDPOINT"):
        env.delenv(name, raising=False)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                        "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}.items():
        env.setenv(name, value)


@pytest.fixture(scope="session", autouse=True)
def allowed_root(tmp_path_factory):
    """The Airflow DAGs' Variables may name the test session's folders (CORRELAKE_ALLOWED_ROOT;
    its default, CORRELAKE_HOME, holds none of them)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CORRELAKE_ALLOWED_ROOT", str(tmp_path_factory.getbasetemp().resolve()))
        yield


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


# -- Nor fewer tests than the floor (`collected_floor`, pyproject.toml) in the whole suite --
def pytest_addoption(parser):
    parser.addini("collected_floor", "the fewest tests the whole suite may collect under CORRELAKE_FORBID_SKIPS=1")


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect any
def pytest_collection_modifyitems(config, items):
    floor = int(config.getini("collected_floor") or 0)
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    if os.environ.get("CORRELAKE_FORBID_SKIPS") == "1" and whole and len(items) < floor:
        pytest.exit(f"collected {len(items)} tests, fewer than the floor of {floor} (collected_floor in "
                    "pyproject.toml): a test module lost, or tests merged on purpose (then lower the floor)",
                    returncode=pytest.ExitCode.TESTS_FAILED)


# -- Spark (tests/spark, tests/integration) ----------------------------------------------
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
    from support.helpers import start_driver

    process, socket, log = start_driver(tmp_path_factory.mktemp("driver"))
    yield socket, log
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    assert log.read_text().rstrip().endswith("correlake driver: stopped by SIGTERM")
    assert not socket.exists() and not socket.with_name("driver.sock.key").exists()


# -- S3 (tests/unit/test_s3server.py, test_objectstore_state.py; tests/integration/test_s3_*.py) --
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
    """The test session's S3 server (tests/support/s3server.py), set as CORRELAKE_S3_ENDPOINT,
    with the bucket S3_BUCKET; stopped at the end."""
    from support.s3server import S3Server

    from correlake.lake import objectstore

    server = S3Server(tmp_path_factory.mktemp("s3") / "server.log")
    server.start()
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("CORRELAKE_S3_ENDPOINT", server.endpoint)
            objectstore.client().create_bucket(Bucket=S3_BUCKET)
            yield S3(server)
    finally:
        server.stop()
