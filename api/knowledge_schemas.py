"""A document hit of a memory search with `include_knowledge` (`pipeline/memory/knowledge.py`):
the search's rich object, labelled as knowledge."""

from __future__ import annotations

from typing import Literal

from api.schemas import RichObjectOut
from pipeline.domain.read_model import RichObject


class KnowledgeHitOut(RichObjectOut):
    source: Literal["knowledge"] = "knowledge"

    @classmethod
    def of_object(cls, obj: RichObject) -> KnowledgeHitOut:
        return cls(**dict(RichObjectOut.of(obj)))
