"""The one rule for text in request bodies: no NUL and no other control character but tab,
newline and carriage return. Every string field of every body carries `PLAIN_TEXT` (after its
own length and shape constraints), and free JSON (message metadata, memory search's `where`)
carries `PLAIN_JSON` (`PlainJson`): its keys and string values follow the same rule.

Why: Postgres text cannot hold NUL (a request would fail deep inside, or an event the API
accepted be dead-lettered by the consumer), and no text a person writes holds the other control
characters, which forge lines and escapes in logs and terminals. A refusal is a 422 naming the
field (api/errors.py), with the character and its offset in the message.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

# C0 controls but tab (09), newline (0A) and carriage return (0D); DEL (7F) and the C1 controls.
CONTROL_CHARACTERS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
# What the OpenAPI document states for a text field that has no pattern of its own.
PLAIN_TEXT_PATTERN = f"^[^{CONTROL_CHARACTERS}]*$"


def _refusal(value: str, where: str = "") -> ValueError | None:
    found = _CONTROL.search(value)
    if found is None:
        return None
    at = f"{where}: " if where else ""
    return ValueError(f"{at}control character U+{ord(found.group()):04X} at offset "
                      f"{found.start()}; text may hold tab, newline and carriage return but no "
                      "other control character")


def refuse_control_characters(value: str) -> str:
    """`value` as it is, or ValueError naming the first control character and its offset."""
    error = _refusal(value)
    if error is not None:
        raise error
    return value


def refuse_control_characters_in_json(value: Any) -> Any:
    """`value` (decoded JSON) as it is, or ValueError naming the first key or string value,
    by its path, that holds a control character."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                inner = f"{path}.{key}" if path else str(key)
                error = _refusal(key, f"key {inner!r}") if isinstance(key, str) else None
                if error is not None:
                    raise error
                stack.append((inner, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
        elif isinstance(item, str):
            error = _refusal(item, path or "value")
            if error is not None:
                raise error
    return value


class _PlainTextRule:
    """Pydantic metadata: refuse control characters after the string's own constraints (put it
    after them in `Annotated`), and state PLAIN_TEXT_PATTERN in the JSON schema unless the
    string has a pattern of its own (that one, e.g. "non-blank", stays: JSON Schema holds one
    pattern per schema)."""

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(refuse_control_characters,
                                                            handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        out = handler(schema)
        if out.get("type") == "string":
            out.setdefault("pattern", PLAIN_TEXT_PATTERN)
        return out


PLAIN_TEXT = _PlainTextRule()
PLAIN_JSON = AfterValidator(refuse_control_characters_in_json)
PlainJson = Annotated[dict[str, Any], PLAIN_JSON]

