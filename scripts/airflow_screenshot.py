"""Screenshot of a DAG run in the Airflow UI, taken in headless Chromium as a person
would see it: log in on the login page, open the run's grid or graph view, wait until
every task id of the DAG shows, save a PNG.

    .venv/bin/python scripts/airflow_screenshot.py --url http://localhost:8080 --out run.png

Uses Debian's `chromium` and `chromium-driver` (apt-get install chromium chromium-driver)
through Selenium; nothing is downloaded. The run defaults to the DAG's latest
successful one; the password to the one `scripts/airflow.sh` wrote. Exit 0 when every
task id appeared on the page, 1 otherwise (the PNG is saved either way).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from urllib.parse import quote

import requests

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def api(url: str, token: str, path: str, **params) -> dict:
    response = requests.get(f"{url}/api/v2{path}", params=params, headers={"Authorization": f"Bearer {token}"},
                            timeout=30)
    response.raise_for_status()
    return response.json()


def token(url: str, user: str, password: str) -> str:
    response = requests.post(f"{url}/auth/token", json={"username": user, "password": password}, timeout=30)
    response.raise_for_status()
    return response.json()["access_token"]


def browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def log_in(driver, url: str, user: str, password: str, timeout: float) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/auth/login")
    wait = WebDriverWait(driver, timeout)
    wait.until(EC.presence_of_element_located((By.NAME, "username"))).send_keys(user)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: "/auth/login" not in d.current_url)


def screenshot(url: str, user: str, password: str, dag_id: str, run_id: str | None, view: str, out: Path,
               timeout: float = 90.0, size: tuple[int, int] = (1600, 1000)) -> list[str]:
    """Save the run's page as `out`; return the task ids that did not show on it."""
    url = url.rstrip("/")
    jwt = token(url, user, password)
    if run_id is None:
        runs = api(url, jwt, f"/dags/{dag_id}/dagRuns", state="success", order_by="-run_after", limit=1)["dag_runs"]
        if not runs:
            raise SystemExit(f"no successful run of {dag_id} to show")
        run_id = runs[0]["dag_run_id"]
    task_ids = [t["task_id"] for t in api(url, jwt, f"/dags/{dag_id}/tasks")["tasks"]]
    driver = browser(*size)
    try:
        log_in(driver, url, user, password, timeout)
        driver.execute_script("localStorage.setItem('default_dag_view', arguments[0])", json.dumps(view))
        driver.get(f"{url}/dags/{quote(dag_id)}/runs/{quote(run_id)}")
        deadline = time.monotonic() + timeout
        missing = task_ids
        while missing and time.monotonic() < deadline:
            time.sleep(1)
            text = driver.find_element("tag name", "body").text
            missing = [t for t in task_ids if t not in text]
        time.sleep(2)  # let the last states and edges render
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
    return missing


def default_password() -> str | None:
    home = Path(os.environ.get("AIRFLOW_HOME", ROOT / ".local" / "airflow"))
    path = Path(os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", home / "passwords.json"))
    return json.loads(path.read_text()).get("admin") if path.exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:8080", help="the API server (UI) base URL")
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password", default=None, help="default: the admin password scripts/airflow.sh wrote")
    parser.add_argument("--dag", default="correlake_hourly")
    parser.add_argument("--run", default=None, help="DAG run id (default: the latest successful run)")
    parser.add_argument("--view", choices=("grid", "graph"), default="grid")
    parser.add_argument("--out", type=Path, default=ROOT / ".local" / "airflow" / "screenshot.png")
    args = parser.parse_args(argv)
    password = args.password or default_password()
    if password is None:
        parser.error("no --password and no passwords file of scripts/airflow.sh")
    missing = screenshot(args.url, args.user, password, args.dag, args.run, args.view, args.out)
    print(f"screenshot: {args.out}")
    if missing:
        print(f"task ids not on the page: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
