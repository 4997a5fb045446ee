#!/usr/bin/env bash
# Idempotent project set-up: checks Java, creates .venv with the pinned packages,
# fetches the Delta Lake JARs from Maven Central into .local/jars; with --s3, also the
# JARs Spark needs for s3a:// (hadoop-aws and the AWS SDK bundle, some 660 MB) into
# .local/jars-s3 (make test does; the demo does not need them).
# A second run with nothing changed is fast and needs no network.
set -euo pipefail
s3=0
for arg in "$@"; do
  case "$arg" in
    --s3) s3=1 ;;
    *) echo "usage: scripts/setup.sh [--s3]" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
state=".local"
mkdir -p "$state"

die() { echo "correlake setup: $*" >&2; exit 2; }

# Java 17+
command -v java >/dev/null 2>&1 || die "Java 17+ is required (no 'java' on PATH). Install e.g. 'apt-get install openjdk-17-jre-headless'."
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
[ -n "$java_major" ] && [ "$java_major" -ge 17 ] || die "Java 17+ is required, found: $(java -version 2>&1 | head -n1)"

# Python environment
extras="dev,airflow,analyst,s3"
stamp="$state/venv.stamp"
want="$(cat pyproject.toml | sha256sum | cut -c1-16)-$extras"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  command -v python3 >/dev/null 2>&1 || die "python3 (3.11+) is required"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  echo "correlake setup: installing Python packages into .venv (a few minutes the first time) ..."
  began=$SECONDS
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".[$extras]"
  echo "$want" > "$stamp"
  echo "correlake setup: Python packages installed in $((SECONDS - began)) s"
fi

# JARs (not on PyPI): `fetch_jars POM FOLDER WHAT` resolves POM's dependencies with Maven
# into FOLDER, minus what PySpark already ships; again only when POM changes (FOLDER/.stamp).
fetch_jars() {
  local pom="$1" jars="$state/$2" what="$3"
  local want tmp pyspark_jars f artifact
  want="$(sha256sum "$pom" | cut -c1-16)"
  [ "$(cat "$jars/.stamp" 2>/dev/null)" != "$want" ] || return 0
  command -v mvn >/dev/null 2>&1 || die "Maven is required to fetch the $what ('apt-get install maven')"
  echo "correlake setup: fetching the $what with Maven ..."
  local began=$SECONDS
  tmp="$jars.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # Maven 3.8 prints colour codes even with -q -B: its output is shown only when it fails
  mvn -q -B -f "$pom" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$root/$tmp" >"$state/maven.log" 2>&1 \
    || { cat "$state/maven.log" >&2; die "Maven could not fetch the $what (is Maven Central reachable?)"; }
  pyspark_jars="$(.venv/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
  rm -rf "$jars" && mkdir -p "$jars"
  for f in "$tmp"/*.jar; do
    artifact="$(basename "$f" .jar | sed 's/-[0-9][0-9.]*\(-[0-9A-Za-z]*\)\{0,1\}$//')"
    compgen -G "$pyspark_jars/${artifact}-[0-9]*" >/dev/null || mv "$f" "$jars/"
  done
  rm -rf "$tmp"
  echo "$want" > "$jars/.stamp"
  echo "correlake setup: the $what fetched in $((SECONDS - began)) s"
}
fetch_jars tools/delta-jars/pom.xml jars "Delta JARs"
[ "$s3" = 0 ] || fetch_jars tools/s3-jars/pom.xml jars-s3 "S3 JARs (hadoop-aws, AWS SDK)"

# The driver JVM's class archive for this Java and these JARs, unless made already
# (spark/correlake/runtime/class_archive.py): each JVM then starts some 2.5 s sooner.
.venv/bin/python -m correlake.driver.archive
