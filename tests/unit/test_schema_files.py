"""The committed JSON Schemas match the models (regenerate with `python -m schemas.export`)."""

from __future__ import annotations

import json
from pathlib import Path

from schemas.export import SCHEMA_DIR, generate_schema_files, stale_files, write_schema_files


def test_committed_schema_files_are_not_stale() -> None:
    fresh = generate_schema_files()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in SCHEMA_DIR.glob("*.schema.json")}
    assert on_disk == fresh, "stale JSON Schemas: run `python -m schemas.export`"


def test_expected_files_and_format() -> None:
    files = generate_schema_files()
    assert sorted(files) == [
        "entity_decision.schema.json", "envelope.schema.json", "link_delete.schema.json",
        "link_put.schema.json",
        "message_metadata.schema.json", "messages_add.schema.json",
        "object_put.schema.json", "object_soft_delete.schema.json",
        "objects_soft_delete.schema.json",
        "session_delete.schema.json", "session_put.schema.json", "summary_put.schema.json",
    ]
    for text in files.values():
        assert text.endswith("}\n")
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    link = json.loads(files["link_put.schema.json"])
    assert {"from", "to", "relation_type"} <= set(link["required"])  # aliases, not python names
    assert link["additionalProperties"] is False
    envelope = json.loads(files["envelope.schema.json"])
    assert set(envelope["properties"]["type"]["enum"]) == {
        "brainstream.object.put", "brainstream.object.soft_delete",
        "brainstream.link.put", "brainstream.link.delete",
        "brainstream.session.put", "brainstream.session.delete", "brainstream.messages.add",
        "brainstream.message.metadata", "brainstream.summary.put",
        "brainstream.entity.decision", "brainstream.objects.soft_delete",
    }


def test_stale_detection(tmp_path: Path) -> None:
    assert stale_files(tmp_path) == sorted(generate_schema_files())
    write_schema_files(tmp_path)
    assert stale_files(tmp_path) == []
    (tmp_path / "link_put.schema.json").write_text("{}\n")
    (tmp_path / "old.schema.json").write_text("{}\n")
    assert stale_files(tmp_path) == ["link_put.schema.json", "old.schema.json"]
