"""What the compose and image tests share: the files of compose/, and reading the Dockerfile
and compose's `${VAR}` interpolation as the tools do."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_DIR = ROOT / "compose"
DOCKERFILE = COMPOSE_DIR / "Dockerfile"
INTERPOLATION_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Resolve compose `${VAR}`, `${VAR:-default}` and `${VAR:?error}` against `env`."""

    def replace(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op in (":-", "-"):
            return arg or ""
        if op in (":?", "?"):
            raise AssertionError(f"${{{name}}} is required but not set in .env.example")
        return ""

    return INTERPOLATION_RE.sub(replace, value)


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with comments dropped and continuation lines joined."""
    logical: list[str] = []
    current = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or not stripped:
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    if current:
        logical.append(current)
    result = []
    for line in logical:
        instruction, _, args = line.partition(" ")
        result.append((instruction.upper(), args.strip()))
    return result
