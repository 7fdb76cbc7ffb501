"""The documentation keeps up with the interface: every setting is documented."""

from __future__ import annotations

from pathlib import Path

from pipeline.settings import Settings

DOCS = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def test_every_setting_is_documented() -> None:
    text = DOCS.read_text()
    missing = [name.upper() for name in Settings.model_fields if f"`{name.upper()}`" not in text]
    assert missing == [], f"settings missing from docs/operations.md: {missing}"
