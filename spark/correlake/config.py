"""All configuration in one place: defaults, overridable from the environment variables
that docs/configuration.md lists, each read and checked here.

The constants below are fixed defaults (tests patch them), e.g. the lake lock's heartbeat
(LOCK_HEARTBEAT_SECONDS) and stale time (LOCK_STALE_SECONDS): docs/lake.md.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from correlake.errors import UsageError

PACKAGE = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE.parents[1]  # the checkout's root, when the package runs from one
DEFAULT_TTL_MS, DEFAULT_TENANT = 3_600_000, "<default>"
MAX_QUARANTINE_RATIO = 0.01
BROADCAST_ROWS = 200_000  # a run's frames up to this size are broadcast to their joins with history (hints.py)
COMPONENTS_ON_DRIVER = 10_000  # key groups of at most this many edges (links both ways) are solved on the driver
WRITE_THREADS = 4  # tables a run, or a maintenance, writes at once
CANCEL_SECONDS = 30  # an interrupted run waits this long at most for Spark's jobs to be cancelled
ANALYSIS_CACHE_BYTES = 256 * 2**20  # the Delta size of a lake's tables the table cache holds (lake/table_cache.py)
# A run whose new landing files hold at most this much JSON (some 20k records), on a lake
# of at most this many records (its MERGEs rewrite files of the history), has Spark
# evaluate its row projections rather than generate code for them (session.row_projections)
INTERPRETED_MAX_BYTES, INTERPRETED_MAX_HISTORY = 4 * 2**20, 20_000
DRIVER_ROOM_RECORDS, DRIVER_RUN_MAX_BYTES = 20_000, 8 * 2**20  # the driver backend's room; new JSON `auto` gives it
DRIVER_HISTORY_ROOMS = 10  # the touched key groups' history the driver reads, in rooms, to find their quiet points
RUN_PATHS = ("auto", "driver", "spark")  # CORRELAKE_RUN_PATH; `auto`: the run's size decides
GZIP_RATIO = 10  # a gzip file's JSON, estimated from its size
# A run whose new landing files hold at most this much JSON checks each gate beside the next
# stage (run/pipeline.py); a larger one, or a rebuild, gives each its cores (measured: 1k + 1k
# hours and a 100k + 100k first run, some 34 MB, gained; a 1M + 1M first run lost)
GATES_BESIDE_MAX_BYTES = 64 * 2**20
# Landing files are read as streams, line by line (transforms/bronze.py): a longer line
# (its bytes before the line feed, decompressed) is quarantined as `line too long`, with
# only its first LONG_LINE_RAW_BYTES as `raw` (contract revision 2, Bad input).
MAX_LINE_BYTES, LONG_LINE_RAW_BYTES = 16 * 2**20, 64 * 2**10
PARSED_BATCH_BYTES = 32 * 2**20  # a Python worker sends the lines it parsed in Arrow batches of about this much text
LOCK_HEARTBEAT_SECONDS = 10  # the holder of a lake lock rewrites it this often (its heartbeat)
LOCK_STALE_SECONDS = 120  # a lake lock not rewritten for this long is stale, whoever holds it
LOCK_FOREIGN_STALE_SECONDS = 60  # a lock file that no run wrote (not its JSON) is stale this old
ABANDONED_TMP_SECONDS = 60  # a temporary file of files.write_atomic this old was left by a killed process
KEEP_DRIVER_SECONDS = 7200  # a kept driver outlives an hour without runs: hourly runs find it warm
DRIVER_HANDSHAKE_SECONDS = 5  # a caller of the driver proves its key and sends its call within this, or is dropped
DELTA_RETAIN_HOURS = 168  # Delta's default VACUUM retention: less needs `maintain --force`, never from Airflow
MAINTAINED_FILE_ROWS = 2_000_000  # rows of a gold file `maintain` writes apart by liveness (run/maintenance.py)
LOG_RETAIN_HOURS = 168  # each table's delta.logRetentionDuration, set by `maintain` (Delta: 720 h; not under VACUUM's)
AIRFLOW_LOCK_WAIT_SECONDS = 600.0  # an Airflow task waits this long for the lock of a run in progress
AIRFLOW_TASK_TIMEOUT_SECONDS = 2 * 3600  # a task that hangs fails (and is retried) after this
AIRFLOW_RUN_TIMEOUT_SECONDS = 6 * 3600  # a DAG run (one at a time) fails after this, so that the next can start
STAGED_RUN_MAX_AGE_SECONDS = 24 * 3600  # frames an abandoned Airflow run staged are deleted after this
DATA_DOCS_INDEX_VALIDATIONS = 50  # the latest validations the Data Docs index lists (10 runs' gates)

STREAMS, ENGINE_STREAM = ("messages", "workflow_events"), "zeebe"  # canonical; a Zeebe export (a lake reads one)
LANDING_STREAMS, BRONZE_TABLES = (*STREAMS, ENGINE_STREAM), {  # each stream's bronze table (TABLES)
    **{s: f"bronze_{s}" for s in STREAMS}, ENGINE_STREAM: "bronze_engine_records"}
STAGE_NAMES = ("bronze", "silver", "gold")  # the stages of a run, in order (run/stages.STAGES)

# Lake layout: logical name -> path relative to the lake root.
TABLES = {
    "ingested_files": "_meta/ingested_files", "runs": "_meta/runs",
    "bronze_messages": "bronze/messages",
    "bronze_workflow_events": "bronze/workflow_events", "bronze_engine_records": "bronze/engine_records",
    "quarantine": "quarantine/records",
    "silver_messages": "silver/messages",
    "silver_workflow_events": "silver/workflow_events",
    "silver_deployments": "silver/deployments", "silver_engine_definitions": "silver/engine_definitions",
    "key_groups": "silver/key_groups", "silver_engine_pending": "silver/engine_pending",  # exporter records'
    "correlations": "gold/correlations",
    "messages": "gold/messages",
    "subscriptions": "gold/subscriptions",
    "message_started_instances": "gold/message_started_instances",
    "as_of": "gold/as_of",  # one row: the instant gold/messages' statuses are at
    "outbox": "delivery/outbox",  # one event per gold correlation, written with gold (docs/delivery.md)
    "engine_correlations": "gold/engine_correlations",  # the engine's own correlations (contract rev. 4, audit)
}
# What `correlake deliver` writes, under its own lock: not a run's tables (a run neither
# journals nor checks them, so delivery and runs never wait for each other).
DELIVERY_TABLES = {"delivery_state": "delivery/state", "delivery_attempts": "delivery/attempts"}
DELIVERY_PARTITIONS = 8  # the outbox's `partition`: a stable hash of (tenant_id, ordering_key) mod this
# a pass's batch: the due chains it sends before it records their outcomes (what a killed pass may send again)
DELIVERY_BATCH_EVENTS, DELIVERY_BATCH_SECONDS = 5_000, 3.0
# `correlake deliver`'s defaults (docs/delivery.md), each an option of the command
DELIVERY_TTL_SECONDS = 24 * 3600  # an event not acknowledged this long after its first attempt expires
DELIVERY_RETRY_BASE_SECONDS = 1.0  # a retry waits uniform(0, min(cap, base * 2^(attempt-1)))
DELIVERY_RETRY_CAP_SECONDS = 300.0
DELIVERY_MAX_SECONDS = 60.0  # a pass starts no new batch after this long
DELIVERY_COMPACT_FILES = 64  # a delivery table with more files than this is compacted at a pass's end
DELIVERY_RETAIN_DAYS = 30  # `correlake maintain` removes the attempts of events final for longer
WEBHOOK_TIMEOUT_SECONDS = 10.0  # one POST's connect and response time
WEBHOOK_SECRET_ENV = "CORRELAKE_WEBHOOK_SECRET"  # the webhook's signing secret; each secret also from NAME_FILE
SINK_PASSWORD_ENV = "CORRELAKE_SINK_PASSWORD"  # the password of the sink URL's user, for a URL without one
GOLD_TABLES = ("correlations", "messages", "subscriptions", "message_started_instances")
# Silver's tables that MERGEs restate mark replaced rows in deletion vectors instead of rewriting files. The contract's
# tables (bronze, quarantine, gold) have none: that feature keeps readers without it out (delta-rs's `to_pandas`, …).
DELETION_VECTOR_TABLES = ("silver_messages", "key_groups")


class ConfigError(UsageError, ValueError):
    """A setting that cannot be used (a usage or configuration error: exit 2)."""


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def parse_number(text: str, kind: type = float, low: float = -math.inf, high: float = math.inf,
                 what: str = "") -> float | int:
    """`text` as a finite number of `kind` (float or int) in [low, high], or ConfigError."""
    try:
        value = kind(text)
    except ValueError:
        raise ConfigError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise ConfigError(f"must be {what}")
    return value


def _env_number(name: str, default: float, kind: type, low: float, high: float, what: str) -> float | int:
    if (text := _env(name)) is None:
        return default
    try:
        return parse_number(text, kind, low, high, what)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def state_dir() -> Path:
    """CORRELAKE_HOME: by default the checkout's `.local`, or, for an installed package, the
    user's state folder (`$XDG_STATE_HOME/correlake`, `~/.local/state/correlake`)."""
    if (home := _env("CORRELAKE_HOME")) is not None:
        return Path(home)
    if (PROJECT_ROOT / "pyproject.toml").is_file():
        return PROJECT_ROOT / ".local"
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "correlake"


@dataclass(frozen=True)
class SparkSettings:
    master: str = field(default_factory=lambda: _env("CORRELAKE_SPARK_MASTER", "local[*]"))
    jars_dir: Path = field(default_factory=lambda: Path(_env("CORRELAKE_JARS", str(state_dir() / "jars"))))
    s3_jars_dir: Path = field(default_factory=lambda: Path(_env("CORRELAKE_S3_JARS", str(state_dir() / "jars-s3"))))
    shuffle_partitions: int = field(default_factory=lambda: _env_number(
        "CORRELAKE_SHUFFLE_PARTITIONS", 4, int, 1, math.inf, "a whole number, 1 or more"))
    # the heap; the JVM's resident memory is about 0.6 GB more (metaspace, code cache, Arrow buffers)
    driver_memory: str = field(default_factory=lambda: _env("CORRELAKE_DRIVER_MEMORY", "3g"))
    extra_conf: dict = field(default_factory=lambda: parse_conf(_env("CORRELAKE_SPARK_CONF", "")))
    bind_address: str = field(default_factory=lambda: _env("CORRELAKE_SPARK_BIND_ADDRESS", "127.0.0.1"))


@dataclass(frozen=True)
class S3Settings:
    """Where an `s3a://` landing or lake is served. Credentials are AWS's own environment
    variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), read by each
    client itself and never put in a configuration correlake prints or passes on."""
    endpoint: str | None = field(default_factory=lambda: _env("CORRELAKE_S3_ENDPOINT"))  # None: AWS's own
    region: str = field(default_factory=lambda: _env("AWS_REGION", _env("AWS_DEFAULT_REGION", "us-east-1")))


def secret(name: str) -> str | None:
    """The secret in the environment variable `name`, or in the file that `name`_FILE names
    (its text less the line end); None when neither is set. Errors name the source only."""
    value, path = _env(name), _env(f"{name}_FILE")
    if value is not None and path is not None:
        raise ConfigError(f"{name} and {name}_FILE are both set: give the secret once")
    if path is None:
        return value
    try:
        return Path(path).read_text().rstrip("\r\n") or None
    except (OSError, UnicodeError) as exc:
        raise ConfigError(f"{name}_FILE: cannot read {path} ({getattr(exc, 'strerror', None) or type(exc).__name__})"
                          ) from None


def parse_conf(text: str) -> dict:
    """Parse "k1=v1,k2=v2" into a dict."""
    conf = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"CORRELAKE_SPARK_CONF: item {item!r} is not key=value")
        conf[key.strip()] = value.strip()
    return conf


def driver_socket() -> Path | None:
    """The socket of the driver that runs and stages go to; None: run in this process."""
    return None if (value := _env("CORRELAKE_DRIVER")) is None else Path(value).resolve()


def keep_driver_seconds() -> float:
    """How long a kept driver waits for its next call (0: no kept driver)."""
    return _env_number("CORRELAKE_KEEP_DRIVER", KEEP_DRIVER_SECONDS, float, 0.0, 10 ** 9, "0 or more seconds")


def keep_driver_warm_up() -> int:
    """The increments of a kept driver's idle warm-up (0: none)."""
    return _env_number("CORRELAKE_KEEP_DRIVER_WARM_UP", 0, int, 0, 100, "a whole number from 0 to 100")


def default_driver_socket() -> Path:
    """Where `correlake serve` listens unless told otherwise."""
    return driver_socket() or state_dir() / "driver.sock"


def allowed_roots() -> list[Path]:
    """The folders the Airflow DAGs' landing and lake must be in: CORRELAKE_ALLOWED_ROOT, else
    CORRELAKE_HOME (which holds their defaults); links resolved."""
    text = _env("CORRELAKE_ALLOWED_ROOT")
    if text is None:
        return [state_dir().resolve()]
    roots = [Path(part) for part in text.split(os.pathsep) if part]
    if not roots or not all(root.is_absolute() for root in roots):
        raise ConfigError(f"CORRELAKE_ALLOWED_ROOT: {text!r} is not absolute folder paths separated by "
                          f"{os.pathsep!r}")
    return [root.resolve() for root in roots]


def allowed_uris() -> list[str]:
    """The object storage prefixes the Airflow DAGs' landing and lake may be under:
    CORRELAKE_ALLOWED_URIS, comma-separated `s3a://BUCKET/PREFIX`s (none unless set)."""
    uris = [part.strip().rstrip("/") for part in (_env("CORRELAKE_ALLOWED_URIS") or "").split(",") if part.strip()]
    if bad := [uri for uri in uris if not is_uri(uri) or "/../" in f"{uri}/" or "/./" in f"{uri}/"]:
        raise ConfigError(f"CORRELAKE_ALLOWED_URIS: {bad[0]!r} is not an s3a://BUCKET/PREFIX URI")
    return uris


def run_path() -> str:  # CORRELAKE_RUN_PATH
    if (path := _env("CORRELAKE_RUN_PATH", "auto")) not in RUN_PATHS:
        raise ConfigError(f"CORRELAKE_RUN_PATH: {path!r} is not one of {', '.join(RUN_PATHS)}")
    return path


def progress_wanted() -> bool:
    """CORRELAKE_PROGRESS `1` or `0`; unset: whether stderr is a terminal (quiet in CI and Airflow)."""
    return sys.stderr.isatty() if (value := _env("CORRELAKE_PROGRESS")) is None else value == "1"


def default_max_quarantine_ratio() -> float:
    return _env_number("CORRELAKE_MAX_QUARANTINE_RATIO", MAX_QUARANTINE_RATIO, float, 0.0, 1.0, "between 0 and 1")


_MEMORY = re.compile(r"\d+(b|[kmgtp]b?)?", re.IGNORECASE)  # the JVM's and Spark's memory sizes
_ADDRESS = re.compile(r"[\w.:-]+")  # a host name, an IPv4 or IPv6 address
_ENDPOINT = re.compile(r"https?://[\w.-]+(:\d+)?/?")
_MASTER = re.compile(r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|(spark|k8s)://\S+|yarn")


def delivery_delay_ms() -> int:
    """The outbox's delivery delay: correlations later than `as_of` − it are held back
    until a run whose as_of is late enough (docs/delivery.md)."""
    seconds = _env_number("CORRELAKE_DELIVERY_DELAY", 0, float, 0.0, 10 ** 9, "0 or more seconds")
    return round(seconds * 1000)


def full_listing_seconds() -> int:
    """CORRELAKE_FULL_LISTING_HOURS: 0 (the default), every run lists the whole landing; N, its
    producers write lexically ordered paths (docs/lake.md *Discovery*) and a run lists from
    each stream's last ingested path on, the whole landing every N hours (or `--full-listing`)."""
    return round(_env_number("CORRELAKE_FULL_LISTING_HOURS", 0, float, 0.0, 10 ** 6, "0 or more hours") * 3600)


def validate() -> None:
    """Every setting from the environment usable, or ConfigError (before any work starts)."""
    settings = SparkSettings()
    if not _MEMORY.fullmatch(settings.driver_memory):
        raise ConfigError(f"CORRELAKE_DRIVER_MEMORY: {settings.driver_memory!r} is not a memory size (3g, 4096m)")
    if not _MASTER.fullmatch(settings.master):
        raise ConfigError(f"CORRELAKE_SPARK_MASTER: {settings.master!r} is not a Spark master URL (local[*], "
                          "local[N], spark://HOST:PORT, yarn, k8s://…)")
    if not _ADDRESS.fullmatch(settings.bind_address):
        raise ConfigError(f"CORRELAKE_SPARK_BIND_ADDRESS: {settings.bind_address!r} is not a host name or address")
    keep_driver_seconds()
    endpoint = S3Settings().endpoint
    if endpoint is not None and not _ENDPOINT.fullmatch(endpoint):
        raise ConfigError(f"CORRELAKE_S3_ENDPOINT: {endpoint!r} is not an http(s)://HOST[:PORT] URL")
    default_max_quarantine_ratio()
    run_path()
    allowed_roots()
    allowed_uris()
    delivery_delay_ms()
    full_listing_seconds()
    secret(WEBHOOK_SECRET_ENV), secret(SINK_PASSWORD_ENV)


def is_uri(location: str | Path) -> bool:
    """Whether `location` names object storage (`s3a://`, `s3://`) rather than a folder."""
    return str(location).startswith(("s3a://", "s3://"))


def absolute(location: str | Path) -> str:
    """A folder's absolute path, links resolved, or an object storage URI (no trailing `/`)."""
    return str(location).rstrip("/") if is_uri(location) else str(Path(location).resolve())


def join(location: str, *parts: str) -> str:
    """`location` / parts, for a folder or an object storage URI."""
    return "/".join((absolute(location), *parts))


def table_path(lake: str | Path, name: str) -> str:
    """Absolute path (or URI) of a lake table (Delta's SQL path identifiers must be absolute)."""
    return join(lake, (TABLES | DELIVERY_TABLES)[name])


def lake_state_dir(lake: str | Path) -> Path:
    """A lake's own state beside its tables: the run lock, the journal, staged runs."""
    return Path(lake) / "_state"


def quality_dir(lake: str | Path) -> Path:
    """The gates' Great Expectations files: `<lake>/_quality`, or for a lake in object storage
    a local folder under CORRELAKE_HOME named for its URI (GX keeps them in local files)."""
    if is_uri(lake):
        return state_dir().resolve() / "quality" / absolute(lake).split("://", 1)[1]
    return Path(lake).resolve() / "_quality"


def data_docs_dir(lake: str | Path) -> Path:  # the gates' Great Expectations Data Docs site
    return quality_dir(lake) / "data_docs"


def validation_results_dir(lake: str | Path) -> Path:  # the gates' results (JSON); their pages go with them
    return quality_dir(lake) / "validation_results"


def demo_dir() -> Path:  # `correlake demo`'s folder (landing/, lake/), the Airflow DAG's default landing
    return state_dir() / "demo"


def data_dir(name: str) -> Path:
    """A folder of the project the package reads (`sql`, `expectations`, `examples/consumers`):
    the copy an installed package carries (`setup.py`), else the checkout's."""
    packaged = PACKAGE / "_data" / name
    return packaged if packaged.is_dir() else PROJECT_ROOT / name


def sql_dir() -> Path:
    return data_dir("sql")


def expectations_dir() -> Path:
    return data_dir("expectations")
