"""What `make airflow` (scripts/airflow.sh) prepares before it starts a local Airflow: a
private AIRFLOW_HOME, the keys that sign the API's tokens and the log servers' requests,
the admin's password (generated once, shown once) and the demo landing. Run as
`python -m correlake.interfaces.airflow_local`; it prints shell lines for the script to
`eval`: the settings that read the keys, and the login line. With `--follow COMPONENTS
URL` it prints a line per change of Airflow's state instead (`follow`).

AIRFLOW_HOME holds the metadata database, `airflow.cfg`, the signing keys, the passwords
file and the task logs: its owner alone may read it (0700), and the keys and passwords
files are created 0600 before their content is written."""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import tempfile
from pathlib import Path

USER = "admin"
# Airflow's HMAC keys, by the setting that reads each: Airflow generates 16 random bytes
# for them, below the 64 that RFC 7518 asks of a key for HS512, with which Airflow signs.
SIGNING_KEYS = {"AIRFLOW__API__SECRET_KEY": "api_secret_key", "AIRFLOW__API_AUTH__JWT_SECRET": "jwt_secret"}
KEY_BYTES = 64


def private_home(home: Path) -> None:
    """A folder only its owner may open (AIRFLOW_HOME, its keys): created if need be, mode 0700
    (an existing one is made so)."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.chmod(0o700)


def admin_password(passwords: Path) -> str | None:
    """Give USER a password in the passwords file of Airflow's simple auth manager: the new
    password, or None if the file had one (the file then only made 0600)."""
    users = json.loads(passwords.read_text()) if passwords.exists() else {}
    if USER in users:
        passwords.chmod(0o600)
        return None
    users[USER] = secrets.token_urlsafe(12)
    _write_private(passwords, json.dumps(users) + "\n")
    return users[USER]


def signing_keys(home: Path) -> dict[str, str]:
    """The settings that have Airflow read its signing keys from files of `home/keys`
    (`<setting>_CMD`: the key stays out of every process's environment), each key made
    once, of KEY_BYTES random bytes; the folder 0700 (an existing one made so)."""
    folder = home / "keys"
    private_home(folder)
    settings = {}
    for setting, name in SIGNING_KEYS.items():
        if not (path := folder / name).exists():
            _write_private(path, secrets.token_hex(KEY_BYTES))
        settings[f"{setting}_CMD"] = f"cat {shlex.quote(str(path))}"
    return settings


def _write_private(path: Path, text: str) -> None:
    """Replace `path` by a file created 0600 (mkstemp) before `text` is written to it."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def login(passwords: Path) -> str:
    """The login line: the password when it was just generated, else where it is kept."""
    password = admin_password(passwords)
    if password is None:
        return f"{USER}, password in {passwords} (shown at the first start only)"
    return f"{USER} / {password}   (shown this once; kept in {passwords}, mode 0600)"


# the scheduler's line when a DAG run ends: "Marking run <DagRun dag @ date: run_id, state:…> successful"
_RUN_ENDED = re.compile(r"Marking run <DagRun (?P<dag>\S+) @ [^>]*?: (?P<run>[^,>]+),.*?> (?P<state>successful|failed)")


def follow(components: Path, url: str, every: float = 2.0) -> None:
    """`make airflow`'s console after the start: a line when Airflow's health changes (the
    UI up; the scheduler, DAG processor or triggerer healthy or not) and when a DAG run ends,
    read from the API's health endpoint and the scheduler's log (`components`/scheduler.log)."""
    import time
    import urllib.request

    def say(text: str) -> None:
        print(f"correlake: {time.strftime('%H:%M:%S')} {text}", flush=True)

    health, log = None, (components / "scheduler.log").open("r", encoding="utf-8", errors="replace")
    log.seek(0, os.SEEK_END)
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=5) as answer:
                now = {part: value.get("status") for part, value in json.load(answer).items()
                       if isinstance(value, dict)}
        except (OSError, ValueError):
            now = None
        if now != health:
            if now is None:
                say(f"Airflow's API at {url} does not answer" + (" (yet)" if health is None else ""))
            else:
                say(f"Airflow at {url}: " + ", ".join(f"{part} {status}" for part, status in sorted(now.items())))
            health = now
        for line in log.readlines():
            if found := _RUN_ENDED.search(line):
                say(f"DAG run {found['run']} of {found['dag']}: {found['state']}")
        time.sleep(every)


def main() -> None:
    import sys

    if sys.argv[1:2] == ["--follow"]:
        return follow(Path(sys.argv[2]), sys.argv[3])
    from correlake.config import demo_dir
    from correlake.samples.demo import write_demo_landing

    home = Path(os.environ["AIRFLOW_HOME"])
    private_home(home)
    write_demo_landing(demo_dir() / "landing")
    for setting, value in signing_keys(home).items():
        print(f"export {setting}={shlex.quote(value)}")
    print(f"login={shlex.quote(login(Path(os.environ['AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE'])))}")


if __name__ == "__main__":
    main()
