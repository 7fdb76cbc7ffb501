"""The operator page's data (`GET /v1/admin/status`, the web explorer's operator page): what
`brainstream status --json` reports, plus the dead letters themselves with their reasons and the
index generations. It spans every tenant, so only admin keys read it (api/routes/operator.py).

Each part is collected on its own, like `status`: a part whose service is down, or that fails,
is named in `errors` and the others still answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipeline.domain.setting_values import redact_credentials
from pipeline.generations.active import Generation, list_generations
from pipeline.kafka.io import H_EVENT_ID, H_FAILED_AT, H_FIELD, H_MESSAGE
from pipeline.ops import dlq
from pipeline.ops.status import collect
from pipeline.settings import Settings

# How long the dead-letter read waits for one more record before it decides it read them all:
# the broker's end offsets are unreliable (docs: STACK.md), so an idle poll ends the read.
LETTERS_IDLE_SECONDS = 0.5


@dataclass(frozen=True)
class LetterRow:
    """One dead letter as the operator page lists it."""

    ref: str
    code: str
    message: str | None
    field: str | None
    event_id: str | None
    failed_at: str | None
    event_type: str | None
    namespace: str | None

    @classmethod
    def of(cls, letter: dlq.DeadLetter) -> LetterRow:
        envelope = _json_object(letter.value)
        event_type, namespace = envelope.get("type"), envelope.get("namespace")
        return cls(ref=letter.ref, code=letter.code, message=letter.header(H_MESSAGE),
                   field=letter.header(H_FIELD), event_id=letter.header(H_EVENT_ID),
                   failed_at=letter.header(H_FAILED_AT),
                   event_type=event_type if isinstance(event_type, str) else None,
                   namespace=namespace if isinstance(namespace, str) else None)


def _json_object(value: bytes) -> dict[str, Any]:
    """The letter's value as a JSON object, or {} (a poison record need not be JSON)."""
    try:
        found = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return {}
    return found if isinstance(found, dict) else {}


def operator_view(active: Settings, base: Settings, *, max_letters: int) -> dict[str, Any]:
    """The status of the active generation (`active`: its consumer group's lag), the dead
    letters (at most `max_letters`, oldest first, with `truncated` when more were left) and
    counts per code, and the generations recorded against the base settings."""
    report = collect(active, group=active.consumer_group)
    out = report.to_dict()
    out["index"] = {"generation": active.generation, "graph": active.graph_name,
                    "consumer_group": active.consumer_group}
    errors: dict[str, str] = out["errors"]
    try:
        out["generations"] = [_generation(g) for g in list_generations(base)]
    except Exception as exc:  # a down database is reported, not raised (as `status` does)
        errors["generations"] = redact_credentials(f"{type(exc).__name__}: {exc}")
    if "dead_letters" in errors:  # the broker is down: the letters cannot be read either
        return out
    try:
        letters = dlq.read_all(base, max_records=max_letters + 1,
                               idle_seconds=LETTERS_IDLE_SECONDS)
    except Exception as exc:
        errors["dead_letter_list"] = redact_credentials(f"{type(exc).__name__}: {exc}")
        return out
    shown = letters[:max_letters]
    out["dead_letter_list"] = {
        "letters": [LetterRow.of(letter).__dict__ for letter in shown],
        "by_code": dict(dlq.summarize(shown)),
        "truncated": len(letters) > max_letters}
    return out


def _generation(gen: Generation) -> dict[str, Any]:
    return {"id": gen.id, "state": gen.state, "embedder": gen.embedder,
            "embedding_dim": gen.embedding_dim, "graph": gen.graph_name,
            "consumer_group": gen.consumer_group, "note": gen.note,
            "created_at": gen.created_at, "activated_at": gen.activated_at,
            "implicit": gen.implicit}
