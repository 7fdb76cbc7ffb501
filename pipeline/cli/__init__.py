"""The `brainstream` command: one entry point for operators.

Each area has its module (`config`, `services`, `schema`, `events`, `index`, `generations`,
`processes`, `entities`, `memory`, `lexical`, `mcp`); this one only assembles them under `main`,
the console script of pyproject.toml.
"""

from __future__ import annotations

import click

from pipeline.cli.common import CliGroup
from pipeline.cli.config import config
from pipeline.cli.entities import entities
from pipeline.cli.events import delete, dlq, publish
from pipeline.cli.generations import generations, replay
from pipeline.cli.index import graph, purge, reembed, status, verify
from pipeline.cli.lexical import lexical
from pipeline.cli.mcp import mcp
from pipeline.cli.memory import memory
from pipeline.cli.processes import api, consumer, logs, up, worker
from pipeline.cli.schema import kinds, migrate
from pipeline.cli.services import services


@click.group(cls=CliGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """brainstream: event-driven ingestion and indexing for a knowledge base.

    Settings come from BRAINSTREAM_* environment variables or a .env file
    (`brainstream config` shows them; docs/operations.md lists them).
    """


for _command in (config, services, migrate, kinds, publish, delete, status, dlq, purge, verify,
                 graph, reembed, consumer, worker, api, up, logs, replay, generations, entities,
                 memory, lexical, mcp):
    main.add_command(_command)
