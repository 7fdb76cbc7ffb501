"""`brainstream config`: every setting's effective value (secrets masked) and where it came from,
and the settings reference of docs/operations.md, generated from the same model (`make docs`)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from pipeline.cli.common import context_settings
from pipeline.domain.setting_values import MASK, redact_credentials
from pipeline.settings import GROUPS, PREFIX, Settings, dotenv_names, own_fields, unknown_variables

# Settings whose keys (not values) are credentials: API_KEYS (secret -> the key's record).
_SECRET_KEYS = {"api_keys"}
_URLS = {"postgres_dsn", "redis_url", "falkordb_url", "embedder_url", "entity_http_url",
         "summariser_url", "mcp_api_url", "url"}  # `url`: RERANKER's
BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"


def env_name(name: str) -> str:
    """The environment variable of a setting."""
    return PREFIX + name.upper()


def masked(name: str, value: Any) -> Any:
    """A setting's value as it may be shown: secrets, the keys of key maps and the passwords
    of URLs replaced by a mask."""
    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, BaseModel):
        return {k: masked(k, v) for k, v in value}
    if name in _SECRET_KEYS and isinstance(value, dict):
        return {f"{str(k)[:4]}{MASK}": v.model_dump(mode="json") if isinstance(v, BaseModel)
                else v for k, v in value.items()}
    if isinstance(value, dict):
        return {k: masked(k, v) for k, v in value.items()}
    if name in _URLS and isinstance(value, str):
        return redact_credentials(value)
    return value


def _plain(value: Any) -> Any:
    """A value as JSON can carry it (paths and ids as text)."""
    if isinstance(value, Path | uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def effective(settings: Settings, environ: dict[str, str] | None = None,
              dotenv: Path = Path(".env")) -> list[dict[str, Any]]:
    """Each setting: its group, name, variable, value (masked) and source (`env`, `.env` or
    `default`), in the reference's order."""
    env = {key.upper() for key in (os.environ if environ is None else environ)}
    in_file = dotenv_names(dotenv)
    rows = []
    for group, model in GROUPS:
        for name in own_fields(model):
            var = env_name(name)
            source = "env" if var in env else ".env" if var in in_file else "default"
            rows.append({"group": group, "setting": var, "source": source,
                         "value": _plain(masked(name, getattr(settings, name)))})
    return rows


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        if field.default_factory in (dict, list):
            return "`{}`" if field.default_factory is dict else "`[]`"
        return "computed"
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1 << 20 and (
            value & (value - 1)) == 0:
        return f"`{value >> 20} MiB`" if value < 1 << 30 else f"`{value >> 30} GiB`"
    return f"`{json.dumps(value) if isinstance(value, bool) else value}`"


def reference() -> str:
    """The settings reference of docs/operations.md: one row per setting, grouped by wing."""
    lines = ["| setting | default | what it is, and when to change it |", "|---|---|---|"]
    for group, model in GROUPS:
        lines.append(f"| **{group}** | | |")
        for name in own_fields(model):
            field = model.model_fields[name]
            text = " ".join((field.description or "").split())
            lines.append(f"| `{name.upper()}` | {_default(field)} | {text} |")
    return "\n".join(lines)


def write_reference(doc: Path) -> bool:
    """Replace the generated block of `doc` with the current reference; whether it changed."""
    text = doc.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    if not rest:
        raise click.ClickException(f"{doc} has no {BEGIN} ... {END} block")
    new = f"{head}{BEGIN}\n{reference()}\n{END}{tail}"
    if new == text:
        return False
    doc.write_text(new)
    return True


@click.command("config")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per setting.")
@click.option("--reference", "reference_doc", type=click.Path(path_type=Path), default=None,
              help="Write the settings reference into this Markdown file (between its "
              "settings markers) instead, e.g. docs/operations.md.")
@click.pass_context
def config(ctx: click.Context, as_json: bool, reference_doc: Path | None) -> None:
    """Print every setting's effective value (secrets masked) and where it came from: the
    environment, .env, or the default."""
    if reference_doc is not None:
        changed = write_reference(reference_doc)
        click.echo(f"{reference_doc}: settings reference {'updated' if changed else 'current'}")
        return
    rows = effective(context_settings(ctx))
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
    else:
        width = max(len(row["setting"]) for row in rows)
        group = None
        for row in rows:
            if row["group"] != group:
                group = row["group"]
                click.echo(f"# {group}")
            value = row["value"]
            shown = json.dumps(value) if not isinstance(value, str) else value
            click.echo(f"{row['setting']:<{width}}  {row['source']:<7}  {shown}")
    for name in unknown_variables():
        click.echo(f"warning: {name} is not a setting (ignored)", err=True)
