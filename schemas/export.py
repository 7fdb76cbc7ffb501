"""Export the event JSON Schemas to `schemas/json/` (`python -m schemas.export [--check]`).

Publishers validate against these files, so they are committed; a unit test fails when they are
stale. `--check` exits 1 instead of writing when the files on disk differ.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from schemas.deletes import ObjectsSoftDelete
from schemas.entities import EntityDecision
from schemas.events import Envelope, LinkDelete, LinkPut, ObjectPut, ObjectSoftDelete
from schemas.memory import MessageMetadata, MessagesAdd, SessionDelete, SessionPut, SummaryPut

SCHEMA_DIR = Path(__file__).resolve().parent / "json"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

# file stem -> model; the stems are part of the published interface.
MODELS: dict[str, type[BaseModel]] = {
    "envelope": Envelope,
    "object_put": ObjectPut,
    "object_soft_delete": ObjectSoftDelete,
    "objects_soft_delete": ObjectsSoftDelete,
    "link_put": LinkPut,
    "link_delete": LinkDelete,
    "session_put": SessionPut,
    "session_delete": SessionDelete,
    "messages_add": MessagesAdd,
    "message_metadata": MessageMetadata,
    "summary_put": SummaryPut,
    "entity_decision": EntityDecision,
}


def generate_schema_files() -> dict[str, str]:
    """{filename: file text} of every exported schema (deterministic: sorted keys, 2-space
    indent, trailing newline)."""
    out: dict[str, str] = {}
    for stem, model in MODELS.items():
        schema = {"$schema": JSON_SCHEMA_DIALECT, **model.model_json_schema(by_alias=True)}
        out[f"{stem}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def stale_files(directory: Path = SCHEMA_DIR) -> list[str]:
    """Names of schema files that are missing, differ from freshly generated ones, or are left
    over from a model that is no longer exported."""
    fresh = generate_schema_files()
    stale = {
        name
        for name, text in fresh.items()
        if not (directory / name).is_file()
        or (directory / name).read_text(encoding="utf-8") != text
    }
    if directory.is_dir():
        stale |= {p.name for p in directory.glob("*.schema.json") if p.name not in fresh}
    return sorted(stale)


def write_schema_files(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema file into `directory` (created if needed); returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in generate_schema_files().items():
        path = directory / name
        path.write_text(text, encoding="utf-8", newline="\n")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """Entry point: write the files, or with `--check` report stale ones (exit status 1)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--check"]:
        stale = stale_files()
        for name in stale:
            print(f"stale: {SCHEMA_DIR / name}", file=sys.stderr)
        return 1 if stale else 0
    if args:
        print("usage: python -m schemas.export [--check]", file=sys.stderr)
        return 2
    for path in write_schema_files():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
