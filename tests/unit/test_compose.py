"""docker/compose.yaml, the whole stack (docs/docker.md), checked without a container engine:
it parses; each service is built from docker/Dockerfile or names a pinned image; its
commands and health checks resolve (Airflow's against the installed Airflow's own command
line parser, Spark's classes in PySpark's JARs, correlake's settings against config.py);
its volumes are declared, writable by the image's user, and its bind mounts exist; the
Airflow services run the project's dags/; ports are published on 127.0.0.1 only; no
secret is written in it."""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from correlake import config

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
VENV_BIN = ROOT / ".venv" / "bin"  # the image's .venv is made by the same scripts/setup.sh
# Executables of the project's image outside its .venv: python:3.11-slim-bookworm's shell
BASE_IMAGE_TOOLS = {"bash"}
# The official images' own tools that their services' health checks call (those images are
# not at hand here): PostgreSQL's client tools, RabbitMQ's CLI
OFFICIAL_IMAGE_TOOLS = {"postgres": {"pg_isready"}, "rabbitmq": {"rabbitmq-diagnostics"}}
AIRFLOW_COMPONENTS = {"api-server", "scheduler", "dag-processor", "triggerer"}
SECRET_NAME = re.compile(r"PASS|SECRET|KEY|TOKEN")
REQUIRED_VARIABLE = re.compile(r"\$\{\w+:\?[^}]*\}")  # compose refuses to start without it
URL_PASSWORD = re.compile(r"://[^/:@\s]+:(\$\{[^}]*\}|[^@\s]*)@")


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def argv(value) -> list[str]:
    return shlex.split(value) if isinstance(value, str) else list(value or [])


def image_entrypoint() -> list[str]:
    line = next(line for line in reversed(DOCKERFILE.read_text().splitlines()) if line.startswith("ENTRYPOINT"))
    return json.loads(line.split(None, 1)[1])


def built(service: dict) -> bool:
    return "build" in service


def command_line(service: dict) -> list[str]:
    """What the container runs: its entrypoint (else the image's) and command."""
    entrypoint = argv(service["entrypoint"]) if "entrypoint" in service else image_entrypoint()
    return entrypoint + argv(service.get("command"))


def health_check(service: dict) -> list[str] | None:
    test = service.get("healthcheck", {}).get("test")
    if test is None:
        return None
    kind, *rest = argv(test)
    return shlex.split(rest[0]) if kind == "CMD-SHELL" else rest


def mounts(service: dict) -> list[tuple[str, str]]:
    """(source, target) of each volume, short or long syntax."""
    found = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume["source"], volume["target"]
        found.append((source, target))
    return found


def is_bind(source: str) -> bool:
    return source.startswith((".", "/", "~"))


def runs_airflow(service: dict) -> bool:
    """An Airflow component (`airflow …`) or a script that runs `airflow …` (the init)."""
    line = command_line(service)
    return line[0] == "airflow" or (line[:2] == ["bash", "-c"] and re.search(r"^airflow ", line[2], re.M) is not None)


def spark_class(name: str) -> bool:
    """Whether PySpark's JARs (the image's, made by the same set-up) hold this class."""
    pyspark = Path(importlib.util.find_spec("pyspark").submodule_search_locations[0])
    entry = name.replace(".", "/") + ".class"
    return any(entry in zipfile.ZipFile(jar).namelist() for jar in (pyspark / "jars").glob("spark-core_*.jar"))


def python_code_resolves(code: str) -> bool:
    """The code compiles, each name it imports exists and each name it uses is imported or
    a builtin (nothing of it is run)."""
    tree, known, modules = ast.parse(code), set(dir(builtins)), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            if not all(hasattr(module, alias.name) for alias in node.names):
                return False
            known |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
                name = alias.asname or alias.name.split(".")[0]
                modules[name] = sys.modules[alias.name if alias.asname else name]
    if not all(node.id in known | set(modules) for node in ast.walk(tree) if isinstance(node, ast.Name)):
        return False
    return all(attribute_resolves(node, modules) for node in ast.walk(tree) if isinstance(node, ast.Attribute))


def attribute_resolves(node: ast.Attribute, modules: dict) -> bool:
    """`a.b.c` where `a` is an imported module: each attribute exists (others are not checked)."""
    names = [node.attr]
    while isinstance(node.value, ast.Attribute):
        node = node.value
        names.insert(0, node.attr)
    if not (isinstance(node.value, ast.Name) and node.value.id in modules):
        return True
    target = modules[node.value.id]
    for name in names:
        if not hasattr(target, name):
            return False
        target = getattr(target, name)
    return True


def airflow_rejects(argvs: list[list[str]], home: Path) -> list[list[str]]:
    """Those of `argvs` that the installed Airflow's command line parser refuses (a command
    or option it does not have), parsed in a process of its own with a scratch AIRFLOW_HOME."""
    script = (
        "import contextlib, io, json, sys\n"
        "from airflow.cli.cli_parser import get_parser\n"
        "parser, refused = get_parser(), []\n"
        "for argv in json.load(sys.stdin):\n"
        "    try:\n"
        "        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "            parser.parse_args(argv)\n"
        "    except SystemExit:\n"
        "        refused.append(argv)\n"
        "print(json.dumps(refused))\n")
    env = {**os.environ, "AIRFLOW_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(argvs), env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_each_service_is_built_from_the_dockerfile_or_names_a_pinned_image(services):
    for name, service in services.items():
        if built(service):
            build = service["build"]
            assert ((DOCKER / build["context"]).resolve() / build["dockerfile"]) == DOCKERFILE, name
            assert service["image"] == "correlake:latest", name  # one image, built once, for every such service
        else:
            image, _, tag = service["image"].partition(":")
            assert tag and tag != "latest", name
            assert name in OFFICIAL_IMAGE_TOOLS, f"{name}: an image not built here, whose tools the test knows"


def test_each_command_and_health_check_resolves(services, tmp_path):
    airflow_argvs, problems = [], []

    def check(line: list[str], where: str, image: str) -> None:
        exe, args = line[0], line[1:]
        if image != "project":
            if exe not in OFFICIAL_IMAGE_TOOLS[image]:
                problems.append(f"{where}: {exe} is not a tool of the {image} image")
        elif exe in ("bash", "sh") and args[:1] == ["-c"]:
            for statement in filter(None, (s.strip() for s in args[1].splitlines())):
                tokens = shlex.split(statement)
                if tokens[0] != "set":
                    check(tokens, where, image)
        elif not ((VENV_BIN / exe).exists() or exe in BASE_IMAGE_TOOLS):
            problems.append(f"{where}: {exe} is not in the image")
        elif exe == "airflow":
            airflow_argvs.append(args)
        elif exe == "python" and args[:1] == ["-c"]:
            if not python_code_resolves(args[1]):
                problems.append(f"{where}: python -c imports a name that does not exist")
        elif exe == "spark-class":
            if not spark_class(args[0]):
                problems.append(f"{where}: no class {args[0]} in PySpark")
        elif exe == "correlake":
            from correlake.interfaces.cli import build_parser

            try:
                build_parser().parse_args(args)
            except SystemExit as exc:
                if exc.code:
                    problems.append(f"{where}: correlake refuses {args}")
        else:
            problems.append(f"{where}: the test does not know how to check {exe}")

    for name, service in services.items():
        image = "project" if built(service) else name
        if built(service) or "command" in service or "entrypoint" in service:
            check(command_line(service), f"{name} command", image)
        if (probe := health_check(service)) is not None:
            check(probe, f"{name} health check", image)
    assert not problems
    assert not airflow_rejects(airflow_argvs, tmp_path)
    assert {args[0] for args in airflow_argvs} >= AIRFLOW_COMPONENTS | {"db", "jobs"}


def test_volumes_are_declared_and_bind_mounts_exist_in_the_project(services):
    declared = set(yaml.safe_load(COMPOSE.read_text())["volumes"])
    used = set()
    for name, service in services.items():
        for source, _ in mounts(service):
            if is_bind(source):
                path = (DOCKER / source).resolve()
                assert path.exists() and path.is_relative_to(ROOT), f"{name}: bind mount {source}"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
    assert used == declared


def test_named_volumes_on_the_image_are_its_users(services):
    """A new named volume takes the owner of the image's folder it is mounted on: each such
    folder is made the image's user's (uid 10001) in the Dockerfile."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    owned = {path for match in re.finditer(r"chown 10001 ([^&\n]+)", text) for path in match.group(1).split()}
    for name, service in services.items():
        for source, target in mounts(service):
            if built(service) and not is_bind(source):
                assert target in owned, f"{name}: {target} would be root's"


def test_the_airflow_services_run_the_projects_dags_on_postgres_with_the_local_executor(services):
    airflow = {name: service for name, service in services.items() if runs_airflow(service)}
    assert {command_line(s)[1] for s in airflow.values() if command_line(s)[0] == "airflow"} == AIRFLOW_COMPONENTS
    for name, service in airflow.items():
        env = service["environment"]
        dags = [target for source, target in mounts(service) if is_bind(source) and (DOCKER / source).resolve() ==
                ROOT / "dags"]
        assert dags == [env["AIRFLOW__CORE__DAGS_FOLDER"]], name
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
        assert re.fullmatch(r"postgresql\+psycopg2://airflow:.+@postgres:5432/airflow",
                            env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]), name
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy", name
    init = [name for name, s in airflow.items() if re.search(r"^airflow db migrate$", command_line(s)[-1], re.M)]
    assert len(init) == 1
    for name, service in airflow.items():  # the components start on a migrated database
        if name not in init:
            assert service["depends_on"][init[0]]["condition"] == "service_completed_successfully", name


def test_the_tasks_reach_the_cluster_the_lake_and_the_sink_with_the_projects_settings(services, monkeypatch):
    """The scheduler (where the LocalExecutor runs the tasks) has settings that config.py
    takes; its Variables lie in its allowed root; its Spark master is the master service;
    the executors see the landing and lake at the drivers' paths."""
    scheduler = next(s for s in services.values() if command_line(s)[:2] == ["airflow", "scheduler"])
    env = scheduler["environment"]
    source = Path(config.__file__).read_text()
    for key, value in env.items():
        if key.startswith("CORRELAKE_"):
            assert f'"{key}"' in source, f"{key} is not a setting of config.py"
            monkeypatch.setenv(key, value)
    config.validate()
    roots = config.allowed_roots()
    for variable in ("correlake_landing", "correlake_lake"):
        assert any(Path(env[f"AIRFLOW_VAR_{variable.upper()}"]).is_relative_to(root) for root in roots)
    host, port = re.fullmatch(r"spark://([\w-]+):(\d+)", env["CORRELAKE_SPARK_MASTER"]).groups()
    master = command_line(services[host])
    assert master[1].endswith("master.Master") and master[master.index("--port") + 1] == port
    assert env["CORRELAKE_SPARK_BIND_ADDRESS"] == scheduler["hostname"]
    workers = [s for s in services.values() if command_line(s)[1:2] == ["org.apache.spark.deploy.worker.Worker"]]
    assert len(workers) == 2
    data = {(source, target) for source, target in mounts(scheduler) if target.startswith("/data/")}
    assert {target for _, target in data} == {env["AIRFLOW_VAR_CORRELAKE_LANDING"], env["AIRFLOW_VAR_CORRELAKE_LAKE"]}
    for worker in workers:
        line = command_line(worker)
        assert line[-1] == env["CORRELAKE_SPARK_MASTER"]
        assert (line[line.index("--cores") + 1], line[line.index("--memory") + 1]) == ("1", "1536m")
        assert data <= set(mounts(worker))
    from correlake.delivery.sinks import SINKS

    assert [key for key in env if key.startswith("AIRFLOW_CONN_")] == ["AIRFLOW_CONN_CORRELAKE_RABBITMQ"]
    assert "rabbitmq" in SINKS
    assert re.fullmatch(r"amqp://\w+:.+@rabbitmq:5672/%2F", env["AIRFLOW_CONN_CORRELAKE_RABBITMQ"])


def test_ports_are_published_on_loopback_only(services):
    published = [(name, port) for name, s in services.items() for port in s.get("ports", [])]
    assert published
    for name, port in published:
        assert isinstance(port, str) and re.fullmatch(r"127\.0\.0\.1:\d+:\d+", port), f"{name}: {port}"


def test_no_secret_is_written_in_the_file():
    """Every password, key and secret is a variable that compose requires (docker/.env, which
    git and the image's build context leave out)."""
    document = yaml.safe_load(COMPOSE.read_text())
    checked = 0
    for service in document["services"].values():
        env = service.get("environment", {})
        assert isinstance(env, dict)
        for key, value in env.items():
            if SECRET_NAME.search(key) and not key.endswith("_FILE"):
                assert REQUIRED_VARIABLE.fullmatch(str(value)), key
                checked += 1
            for password in URL_PASSWORD.findall(str(value)):
                assert REQUIRED_VARIABLE.fullmatch(password), key
                checked += 1
    assert checked
    assert "docker/.env" in (ROOT / ".gitignore").read_text().splitlines()
    assert "docker/.env" in (ROOT / ".dockerignore").read_text().splitlines()


def test_no_command_line_holds_a_password_and_the_watch_reads_the_brokers_from_a_secret_file(services):
    """A command line is seen by every user of the host (`ps`): the `watch` service names the
    broker's user only, its password comes from a Compose secret (a file) of the same
    required variable as the broker's own."""
    for name, service in services.items():
        assert not URL_PASSWORD.search(" ".join(command_line(service))), name
    watch = services["watch"]
    line = command_line(watch)
    url = urlsplit(line[line.index("--amqp-url") + 1])
    assert (url.username, url.password, url.hostname) == ("correlake", None, "rabbitmq")
    path = Path(watch["environment"][config.SINK_PASSWORD_ENV + "_FILE"])
    assert path.parent == Path("/run/secrets") and watch["secrets"] == [path.name]
    assert yaml.safe_load(COMPOSE.read_text())["secrets"][path.name] == {"environment": "RABBITMQ_PASSWORD"}
    assert services["rabbitmq"]["environment"]["RABBITMQ_DEFAULT_PASS"].startswith("${RABBITMQ_PASSWORD:?")


def test_the_stacks_spark_takes_only_callers_with_its_secret(services):
    """The master, the workers and the drivers (the scheduler's tasks) read one
    spark-defaults.conf that turns on `spark.authenticate` with a required variable's secret:
    a file, where spark-submit, the master and the workers load it, never a command line."""
    content = yaml.safe_load(COMPOSE.read_text())["configs"]["spark_defaults"]["content"]
    conf = dict(line.split(None, 1) for line in content.splitlines() if line.strip())
    assert conf["spark.authenticate"] == "true" and REQUIRED_VARIABLE.fullmatch(conf["spark.authenticate.secret"])
    spark = [name for name, s in services.items() if command_line(s)[0] == "spark-class"] + ["airflow-scheduler"]
    assert len(spark) == 4
    for name in spark:
        folder = services[name]["environment"]["SPARK_CONF_DIR"]
        assert {"source": "spark_defaults", "target": f"{folder}/spark-defaults.conf"} in services[name]["configs"]
