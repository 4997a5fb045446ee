"""What `make airflow` (scripts/airflow.sh) prepares before it starts a local Airflow: a
private AIRFLOW_HOME, the admin's password (generated once, shown once) and the demo
landing. Run as `python -m correlake.interfaces.airflow_local`; it prints the login line.

AIRFLOW_HOME holds the metadata database, `airflow.cfg` with the keys that sign the API's
tokens, the passwords file and the task logs: its owner alone may read it (0700), and the
passwords file is created 0600 before its content is written."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from pathlib import Path

USER = "admin"


def private_home(home: Path) -> None:
    """AIRFLOW_HOME, created if need be, mode 0700 (an existing one is made so)."""
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


def main() -> None:
    from correlake.config import demo_dir
    from correlake.samples.demo import write_demo_landing

    private_home(Path(os.environ["AIRFLOW_HOME"]))
    write_demo_landing(demo_dir() / "landing")
    print(login(Path(os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])))


if __name__ == "__main__":
    main()
