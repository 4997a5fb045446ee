"""The driver JVM's class archive is named for the Java and the JARs it serves: any change
of them and no archive matches (the JVM then starts without one)."""

import dataclasses

from correlake.config import SparkSettings
from correlake.runtime import class_archive


def _settings(tmp_path):
    jars, s3 = tmp_path / "jars", tmp_path / "jars-s3"
    jars.mkdir()
    (jars / "delta-spark_4.2_2.13-4.4.0.jar").write_bytes(b"delta")
    return dataclasses.replace(SparkSettings(), jars_dir=jars, s3_jars_dir=s3)


def test_the_archive_is_named_for_its_jars(tmp_path):
    settings = _settings(tmp_path)
    first = class_archive.path(settings)
    assert first.parent == settings.jars_dir / "class-archive" and first == class_archive.path(settings)
    (settings.jars_dir / "delta-spark_4.2_2.13-4.4.0.jar").write_bytes(b"another delta")
    second = class_archive.path(settings)
    assert second != first
    settings.s3_jars_dir.mkdir()
    (settings.s3_jars_dir / "hadoop-aws-3.4.1.jar").write_bytes(b"s3")
    assert class_archive.path(settings) not in (first, second)


def test_the_jvm_maps_an_archive_only_if_the_set_up_made_one_for_its_jars(tmp_path):
    settings = _settings(tmp_path)
    assert class_archive.java_options(settings) == []
    archive = class_archive.path(settings)
    archive.parent.mkdir()
    archive.write_bytes(b"")
    assert class_archive.java_options(settings) == [f"-XX:SharedArchiveFile={archive}", *class_archive.QUIET]
    dump = tmp_path / "new.jsa"
    assert class_archive.java_options(settings, dump_to=dump)[0] == f"-XX:ArchiveClassesAtExit={dump}"


def test_an_archive_cut_short_is_not_mappable(tmp_path):
    """A JVM aborts on one (the set-up keeps only an archive a JVM has mapped whole)."""
    archive = class_archive.path(SparkSettings())
    assert archive.exists(), "scripts/setup.sh makes it"
    assert class_archive.mappable(archive)
    cut = tmp_path / "cut.jsa"
    with archive.open("rb") as whole:
        cut.write_bytes(whole.read(1 << 20))
    assert not class_archive.mappable(cut)
    assert list(tmp_path.iterdir()) == [cut]  # no crash report left behind
