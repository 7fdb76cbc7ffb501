"""`brainstream config`: every setting's effective value with its source, secrets masked, and a
warning for variables that name no setting."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.config import MASK, effective, masked
from pipeline.settings import Settings, load_settings, unknown_variables

REPO = Path(__file__).resolve().parents[2]


def _rows(settings: Settings, environ: dict[str, str], dotenv: Path
          ) -> dict[str, dict[str, object]]:
    return {row["setting"]: row for row in effective(settings, environ, dotenv)}


def test_every_setting_says_where_it_came_from(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("BRAINSTREAM_MEMORY_WINDOW=20\n")
    environ = {"BRAINSTREAM_API_PORT": "8100"}
    settings = Settings(_env_file=None, api_port=8100, memory_window=20)  # type: ignore[call-arg]
    rows = _rows(settings, environ, dotenv)
    assert len(rows) == len(Settings.model_fields)
    assert rows["BRAINSTREAM_API_PORT"] == {"group": "API", "setting": "BRAINSTREAM_API_PORT",
                                            "source": "env", "value": 8100}
    assert rows["BRAINSTREAM_MEMORY_WINDOW"]["source"] == ".env"
    assert rows["BRAINSTREAM_MEMORY_WINDOW"]["value"] == 20
    assert rows["BRAINSTREAM_SWEEP_INTERVAL"]["source"] == "default"


def test_secrets_are_masked(tmp_path: Path) -> None:
    settings = Settings.model_validate({
        "api_keys": {"tenant-key-123": ["8f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b"],
                     "admin-key-456": {"name": "ops", "operator": True},
                     "curator-key-789": {"name": "Ana", "scopes": {
                         "8f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b": ["admin"]}}},
        "embedder_api_key": "sk-embedding", "postgres_dsn": "postgresql://app:hunter2@db/kb",
        "publisher_keys": {"crm": {"secret": "s" * 32,
                                   "namespaces": ["8f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b"]}}})
    shown = json.dumps(effective(settings, {}, tmp_path / "none"))
    for secret in ("tenant-key-123", "admin-key-456", "curator-key-789", "sk-embedding",
                   "hunter2", "s" * 32):
        assert secret not in shown
    assert masked("postgres_dsn", "postgresql://app:hunter2@db/kb") == \
        f"postgresql://app:{MASK}@db/kb"
    assert "8f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b" in shown  # what a key may read is not secret
    assert '"name": "Ana"' in shown and '"operator": true' in shown


def test_a_variable_that_names_no_setting_is_reported(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("BRAINSTREAM_RRF_K=60\n")
    environ = {"BRAINSTREAM_API_PORT": "8100", "BRAINSTREAM_EMBEDER": "static", "HOME": "/"}
    assert unknown_variables(environ, dotenv) == ["BRAINSTREAM_EMBEDER", "BRAINSTREAM_RRF_K"]


def test_every_process_logs_a_variable_that_names_no_setting(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv("BRAINSTREAM_PPR_HUB_MIN_ROWS", "3")
    caplog.set_level(logging.WARNING, logger="pipeline.settings")
    load_settings()
    assert "BRAINSTREAM_PPR_HUB_MIN_ROWS is not a setting" in caplog.text


def test_the_command_prints_and_warns(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAINSTREAM_")}
    env |= {"BRAINSTREAM_API_WORKERS": "3", "BRAINSTREAM_NO_SUCH": "1",
            "BRAINSTREAM_API_KEYS": '{"dev-secret-key": []}'}
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "config", "--json"], cwd=tmp_path,
                         env=env | {"PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                         check=True)
    rows = {row["setting"]: row for row in map(json.loads, run.stdout.splitlines())}
    assert rows["BRAINSTREAM_API_WORKERS"]["value"] == 3
    assert rows["BRAINSTREAM_API_WORKERS"]["source"] == "env"
    assert "dev-secret-key" not in run.stdout
    assert "BRAINSTREAM_NO_SUCH is not a setting" in run.stderr
