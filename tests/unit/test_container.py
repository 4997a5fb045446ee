"""The container image (docker/Dockerfile) runs as a user without privileges. (Building
it takes minutes and a container engine, so not here: scripts/build_image.sh builds it and
checks its user in a run; docs/container.md.)"""

from __future__ import annotations

import re
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[2] / "docker" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def test_the_image_runs_as_a_non_root_user():
    steps = instructions()
    users = [i for i, (op, _) in enumerate(steps) if op == "USER"]
    assert users, "no USER: the image would run as root"
    user = steps[users[-1]][1].split(":")[0]
    assert user not in ("root", "0")
    assert not any(op == "RUN" for op, _ in steps[users[-1]:])  # the user set after the last build step
    if user.isdigit():  # a numeric user (what Kubernetes' runAsNonRoot checks) made by the image
        assert any(op == "RUN" and f"--uid {user}" in args for op, args in steps)


def test_the_base_is_an_arg_defaulting_to_the_official_python_image():
    """scripts/build_image.sh builds on a local stand-in; a plain build stays on python:3.11-slim-bookworm."""
    steps = instructions()
    (base_from,) = [args for op, args in steps if op == "FROM"]
    assert base_from == "${BASE_IMAGE}"
    first_from = next(i for i, (op, _) in enumerate(steps) if op == "FROM")
    assert ("ARG", "BASE_IMAGE=python:3.11-slim-bookworm") in steps[:first_from]
