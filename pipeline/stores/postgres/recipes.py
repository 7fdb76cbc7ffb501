"""Named expand templates (`expand_recipes`): registered ones, shared by every API process, over
those configured in settings."""

from __future__ import annotations

import re
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.errors import InvalidInput, NotFound
from pipeline.stores.postgres.pool import AsyncConn

RECIPE_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,62}$"
_RECIPE_NAME_RE = re.compile(RECIPE_NAME_PATTERN)

_PUT = ("INSERT INTO expand_recipes (name, spec) VALUES (%s, %s) ON CONFLICT (name)"
        " DO UPDATE SET spec = EXCLUDED.spec, updated_at = now()")
_GET = "SELECT spec FROM expand_recipes WHERE name = %s"


def check_recipe_name(name: str) -> str:
    """`name` if it is a valid recipe name; InvalidInput(field="name") otherwise."""
    if not _RECIPE_NAME_RE.fullmatch(name):
        raise InvalidInput("recipe names are letters, digits, '_' and '-'", field="name")
    return name


class RecipeStore:
    """Named expand templates: registered ones (Postgres) over those from settings."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn],
                 configured: dict[str, dict[str, Any]]) -> None:
        self.pool = pool
        self.configured = configured

    async def put(self, name: str, spec: dict[str, Any]) -> None:
        """Register (or replace) the template `name`."""
        async with self.pool.connection() as conn:
            await conn.execute(_PUT, (check_recipe_name(name), Jsonb(spec)))

    async def get(self, name: str) -> dict[str, Any]:
        """The template `name`: the registered one, else the configured one; NotFound."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(_GET, (check_recipe_name(name),))
            row = await cur.fetchone()
        if row is not None:
            return dict(row[0])
        if name in self.configured:
            return dict(self.configured[name])
        raise NotFound(f"no expand recipe named {name!r}", field="name")
