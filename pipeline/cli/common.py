"""What every `brainstream` subcommand shares: reading settings once per command line, acting on
the active index generation, and turning our own errors into one line and exit status 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from pipeline.domain.errors import BrainstreamError
from pipeline.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])


def context_settings(ctx: click.Context) -> Settings:
    """The settings, read once per command line."""
    obj = ctx.ensure_object(dict)
    if "settings" not in obj:
        obj["settings"] = load_settings()
    settings: Settings = obj["settings"]
    return settings


def active_settings(ctx: click.Context, generation: int | None = None) -> Settings:
    """The settings addressing the active index generation (or the named one): every command
    that reads or writes the index acts on it."""
    from pipeline.generations.active import resolve

    return resolve(context_settings(ctx), generation)


def generation_option(func: F) -> F:
    """`--generation N`: act on that index generation instead of the active one."""
    return click.option("--generation", "generation", type=int, default=None,
                        help="Act on this index generation (default: the active one).")(func)


def echo(line: str) -> None:
    """A progress or report line on stdout (the `report` callback of long operations)."""
    click.echo(line)


class CliGroup(click.Group):
    """Turns our own errors into one clear line and exit status 2, not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrainstreamError as exc:
            click.echo(f"error [{exc.code}]: {exc.message}", err=True)
            sys.exit(2)
