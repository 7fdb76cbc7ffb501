"""Fixtures of the resolution-gap tests (issue 11 review): a fresh migrated database and a fresh
graph per test (`db`, `proj_settings`, shared with the entity tests), so the session's pipeline
never extracts these rows with another extractor while a test runs the stage itself."""

from __future__ import annotations

from tests.entities.conftest import proj_settings
from tests.pipeline.conftest import db

__all__ = ["db", "proj_settings"]
