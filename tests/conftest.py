import os

import pytest

os.environ.setdefault("CORRELAKE_SHUFFLE_PARTITIONS", "2")


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test session (Delta from the local JARs)."""
    from correlake.session import get_spark

    session = get_spark()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def demo_lake(spark, tmp_path_factory):
    """A lake from one real pipeline run over an hour of the demo landing (the analyst tests read it)."""
    from correlake import pipeline
    from correlake.demo import write_demo_landing

    root = tmp_path_factory.mktemp("demo")
    write_demo_landing(root / "landing", hours=1)
    pipeline.run(spark, str(root / "landing"), str(root / "lake"))
    return str(root / "lake")
