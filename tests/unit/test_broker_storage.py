"""Repair of the embedded broker's S3 files after tansu stopped with uploads in flight."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pipeline.services.broker import repair_storage

OBJ = "._S3rver_object"


def _batch(records: int, payload: int = 60) -> bytes:
    """A record batch v2 header (what repair reads) padded to its stated length; tansu stores
    a base offset of 0 in it and the real one in the object's name."""
    body_len = 49 + payload  # everything after the length field
    head = ((0).to_bytes(8, "big") + body_len.to_bytes(4, "big") + (0).to_bytes(4, "big")
            + bytes([2]) + (0).to_bytes(4, "big") + (0).to_bytes(2, "big")
            + (records - 1).to_bytes(4, "big"))
    return head + bytes(12 + body_len - len(head))


def _partition(root: Path, high: int, batches: dict[int, bytes]) -> Path:
    part = root / "tansu/clusters/c/topics/t/partitions/0000000000"
    (part / "records").mkdir(parents=True)
    mark = part / f"watermark.json{OBJ}"
    mark.write_text(json.dumps({"low": None, "high": high, "timestamps": None}))
    for base, data in batches.items():
        name = f"{base:020d}.batch"
        (part / "records" / f"{name}{OBJ}").write_bytes(data)
        (part / "records" / f"{name}{OBJ}.md5").write_text(hashlib.md5(data).hexdigest())
        (part / "records" / f"{name}._S3rver_metadata.json").write_text("{}")
    return part


def test_stale_watermark_is_raised_and_a_cut_short_batch_removed(tmp_path: Path) -> None:
    part = _partition(tmp_path, 5, {0: _batch(7), 7: _batch(3), 10: b""})
    repaired = repair_storage(tmp_path)
    assert len(repaired) == 2
    mark = part / f"watermark.json{OBJ}"
    assert json.loads(mark.read_text())["high"] == 10
    assert (part / f"watermark.json{OBJ}.md5").read_text() == \
        hashlib.md5(mark.read_bytes()).hexdigest()
    assert sorted(p.name for p in (part / "records").iterdir()) == sorted(
        f"{b:020d}.batch{suffix}" for b in (0, 7)
        for suffix in (OBJ, f"{OBJ}.md5", "._S3rver_metadata.json"))


def test_consistent_storage_is_left_alone(tmp_path: Path) -> None:
    part = _partition(tmp_path, 10, {0: _batch(7), 7: _batch(3)})
    before = (part / f"watermark.json{OBJ}").read_bytes()
    assert repair_storage(tmp_path) == []
    assert (part / f"watermark.json{OBJ}").read_bytes() == before
    assert repair_storage(tmp_path / "missing") == []
