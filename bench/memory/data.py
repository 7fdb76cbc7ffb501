"""The memory benchmark's data: LoCoMo dev conversations as message events, their questions, and
turn-level evidence recall.

One LoCoMo conversation is one user (`user_id` = its sample id); each of its sessions is a
brainstream session; each turn a message: `"<speaker>: <text>"` (with an image's caption, as
LoCoMo's own baselines read it), role `user` for speaker A and `assistant` for B, the dia_id and
speaker in its metadata, created at the session's date plus one minute per turn. Questions are
asked across the user's sessions (POST /v1/memory/search's path).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness.runenv import DATASETS

LOCOMO = DATASETS / "locomo_dev" / "locomo_dev.json"
# A turn's id within the namespace: the same conversation gets the same ids on every run.
_TURN_NS = uuid.UUID("2d0b5a4e-6f3c-5e1a-9c7d-4b8e1f0a3c55")
_EVIDENCE_SPLIT = re.compile(r"[\s;,]+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session_id: str
    role: str
    content: str
    created_at: datetime

    @property
    def uuid(self) -> str:
        return str(uuid.uuid5(_TURN_NS, f"{self.session_id}/{self.dia_id}"))


@dataclass(frozen=True)
class Question:
    user_id: str
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    user_id: str
    sessions: dict[str, list[Turn]] = field(default_factory=dict)


def _session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path = LOCOMO) -> tuple[list[Conversation], list[Question]]:
    """The conversations and their questions (evidence ids split, empty evidence dropped)."""
    conversations: list[Conversation] = []
    questions: list[Question] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        user = str(sample["sample_id"])
        conv = sample["conversation"]
        out = Conversation(user)
        speaker_a = conv["speaker_a"]
        n = 1
        while f"session_{n}" in conv:
            sid = f"{user}-s{n}"
            start = _session_time(conv[f"session_{n}_date_time"])
            turns = []
            for i, raw in enumerate(conv[f"session_{n}"]):
                text = f"{raw['speaker']}: {raw['text']}"
                if raw.get("blip_caption"):
                    text += f" [shares {raw['blip_caption']}]"
                turns.append(Turn(raw["dia_id"], sid,
                                  "user" if raw["speaker"] == speaker_a else "assistant",
                                  text, start + timedelta(minutes=i)))
            out.sessions[sid] = turns
            n += 1
        conversations.append(out)
        for qa in sample["qa"]:
            evidence = frozenset(e for raw in qa.get("evidence", [])
                                 for e in _EVIDENCE_SPLIT.split(str(raw)) if e)
            if evidence:
                questions.append(Question(user, str(qa["question"]), int(qa["category"]),
                                          evidence))
    return conversations, questions


def message_payload(turn: Turn) -> dict[str, Any]:
    """A turn as one message of a messages.add event."""
    return {"uuid": turn.uuid, "role": turn.role, "content": turn.content,
            "metadata": {"dia_id": turn.dia_id, "speaker": turn.content.split(":", 1)[0]},
            "created_at": turn.created_at.isoformat()}


def envelope(namespace: uuid.UUID, event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"specversion": "1.0", "id": str(uuid.uuid4()), "source": "bench-memory",
            "type": f"brainstream.{event_type}",
            "time": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "datacontenttype": "application/json", "namespace": str(namespace), "data": data}


def recall(retrieved: list[set[str]], evidence: frozenset[str], k: int) -> float:
    """Evidence recall@k: the share of `evidence` among the dia_ids the top k hits stand for
    (a turn stands for itself; a summary for the turns whose text it kept)."""
    found: set[str] = set()
    for ids in retrieved[:k]:
        found |= ids
    return len(found & evidence) / len(evidence)


def summary_turns(content: str, turns_by_text: dict[str, str]) -> set[str]:
    """The dia_ids of the turns an extractive summary kept (a sentence of a turn's text)."""
    return {dia for text, dia in turns_by_text.items()
            if any(len(s) > 20 and s in content for s in _sentences(text))}


def _sentences(text: str) -> list[str]:
    body = text.split(": ", 1)[-1]
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", body) if s.strip()]
