"""The operator page's dead-letter rows (pipeline/ops/operator_view.py): the reason from the
letter's headers, the event's type and namespace from its value when that is a JSON envelope,
and nothing invented when it is not (a poison record need not be JSON)."""

from __future__ import annotations

import json

from pipeline.kafka.io import H_CODE, H_EVENT_ID, H_FIELD, H_MESSAGE
from pipeline.ops.dlq import DeadLetter
from pipeline.ops.operator_view import LetterRow


def _letter(value: bytes, *headers: tuple[str, str]) -> DeadLetter:
    return DeadLetter(2, 7, b"k", value, tuple((k, v.encode()) for k, v in headers))


def test_a_letter_of_an_envelope_names_its_reason_type_and_namespace() -> None:
    value = json.dumps({"type": "brainstream.object.put", "namespace": "ns-a", "data": {}})
    row = LetterRow.of(_letter(value.encode(), (H_CODE, "unknown_kind"),
                               (H_MESSAGE, "kind 'x' is not in the kind catalog"),
                               (H_FIELD, "data.kind"), (H_EVENT_ID, "e-1")))
    assert row == LetterRow(ref="2:7", code="unknown_kind",
                            message="kind 'x' is not in the kind catalog", field="data.kind",
                            event_id="e-1", failed_at=None,
                            event_type="brainstream.object.put", namespace="ns-a")


def test_a_letter_that_is_not_an_envelope_keeps_its_reason_only() -> None:
    for value in (b"\xff not json", b"[1, 2]", json.dumps({"type": 3, "namespace": [1]}).encode()):
        row = LetterRow.of(_letter(value, (H_CODE, "malformed_json")))
        assert (row.code, row.event_type, row.namespace, row.message) == (
            "malformed_json", None, None, None)
    assert LetterRow.of(_letter(b"{}")).code == "unknown"  # no code header: said so
