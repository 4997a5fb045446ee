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
