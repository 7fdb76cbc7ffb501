"""Prometheus multiprocess mode must be chosen before prometheus_client is first imported (its
value classes are picked at import), so this module does not import it."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.services.settings import StackSettings


def prepare_multiprocess_dir(settings: StackSettings, name: str) -> Path:
    """A clean PROMETHEUS_MULTIPROC_DIR for one worker, set before Celery forks its pool."""
    path = settings.resolved_data_dir / "metrics" / name
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path
