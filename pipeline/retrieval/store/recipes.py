"""Named expand templates (`expand_recipes`), per namespace over read-only operator defaults.

A tenant registers, lists, reads and deletes its own recipes through the API; they are rows with
its namespace and no other tenant sees them. Operator defaults are visible to every tenant and
changed by none: those in settings (`BRAINSTREAM_EXPAND_RECIPES`) and rows without a namespace
(the recipes registered before recipes were scoped, see migration 0011). A tenant's recipe with
a default's name shadows that default for this tenant only; deleting it brings the default back.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.errors import InvalidInput, NotFound, RecipeReadOnly, TooManyRecipes
from pipeline.postgres.pool import AsyncConn

RECIPE_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,62}$"
_RECIPE_NAME_RE = re.compile(RECIPE_NAME_PATTERN)

# Serializes the puts of one namespace, so the count checked is the count written.
_PUT_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('expand_recipes:' || %s, 0))"
_COUNT = ("SELECT count(*) FROM expand_recipes WHERE namespace_id = %s"
          " AND name <> %s")
_PUT = ("INSERT INTO expand_recipes (namespace_id, name, spec) VALUES (%s, %s, %s)"
        " ON CONFLICT (namespace_id, name) WHERE namespace_id IS NOT NULL"
        " DO UPDATE SET spec = EXCLUDED.spec, updated_at = now()")
# The tenant's own recipe first, then the stored default.
_GET = ("SELECT spec, namespace_id IS NOT NULL FROM expand_recipes"
        " WHERE name = %s AND (namespace_id = %s OR namespace_id IS NULL)"
        " ORDER BY namespace_id NULLS LAST LIMIT 1")
_LIST = ("SELECT name, spec, namespace_id IS NOT NULL FROM expand_recipes"
         " WHERE namespace_id = %s OR namespace_id IS NULL")
_DELETE = "DELETE FROM expand_recipes WHERE namespace_id = %s AND name = %s RETURNING 1"
_IS_DEFAULT = "SELECT 1 FROM expand_recipes WHERE namespace_id IS NULL AND name = %s"

Source = Literal["namespace", "default"]


@dataclass(frozen=True)
class Recipe:
    """A recipe as one namespace sees it: its own (`namespace`) or an operator default."""

    name: str
    spec: dict[str, Any]
    source: Source


def check_recipe_name(name: str) -> str:
    """`name` if it is a valid recipe name; InvalidInput(field="name") otherwise."""
    if not _RECIPE_NAME_RE.fullmatch(name):
        raise InvalidInput("recipe names are letters, digits, '_' and '-'", field="name")
    return name


# How many expand recipes one namespace may register through the API: a tenant's templates, not
# a store of its data (each recipe is read on every expand of its name).
MAX_PER_NAMESPACE = 1000


class RecipeStore:
    """A namespace's expand templates over the operator defaults (stored and configured)."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn],
                 configured: dict[str, dict[str, Any]], *, max_per_namespace: int | None = None
                 ) -> None:
        self.pool = pool
        self.configured = configured
        self.max_per_namespace = max_per_namespace or MAX_PER_NAMESPACE

    async def put(self, namespace: uuid.UUID, name: str, spec: dict[str, Any]) -> None:
        """Register (or replace) the namespace's template `name`; TooManyRecipes when the
        namespace already holds `max_per_namespace` others. Defaults are never changed: one of
        the same name is shadowed for this namespace."""
        check_recipe_name(name)
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(_PUT_LOCK, (str(namespace),))
            cur = await conn.execute(_COUNT, (namespace, name))
            row = await cur.fetchone()
            if row is not None and row[0] >= self.max_per_namespace:
                raise TooManyRecipes(f"a namespace holds at most {self.max_per_namespace}"
                                     " expand recipes: delete one first", field="name")
            await conn.execute(_PUT, (namespace, name, Jsonb(spec)))

    async def get(self, namespace: uuid.UUID, name: str) -> Recipe:
        """The template `name` as `namespace` sees it: its own, else the stored default, else
        the configured one; NotFound."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(_GET, (check_recipe_name(name), namespace))
            row = await cur.fetchone()
        if row is not None:
            return Recipe(name, dict(row[0]), "namespace" if row[1] else "default")
        if name in self.configured:
            return Recipe(name, dict(self.configured[name]), "default")
        raise NotFound(f"no expand recipe named {name!r}", field="name")

    async def list(self, namespace: uuid.UUID) -> list[Recipe]:
        """Every template `namespace` sees, by name (its own shadowing defaults of that name)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(_LIST, (namespace,))
            rows = await cur.fetchall()
        seen: dict[str, Recipe] = {
            name: Recipe(name, dict(spec), "default") for name, spec in self.configured.items()}
        for name, spec, own in sorted(rows, key=lambda r: bool(r[2])):  # own ones last: win
            seen[name] = Recipe(name, dict(spec), "namespace" if own else "default")
        return [seen[name] for name in sorted(seen)]

    async def delete(self, namespace: uuid.UUID, name: str) -> None:
        """Delete the namespace's template `name`; RecipeReadOnly when `name` is only a
        default, NotFound when the namespace sees no recipe of that name."""
        check_recipe_name(name)
        async with self.pool.connection() as conn:
            cur = await conn.execute(_DELETE, (namespace, name))
            if await cur.fetchone() is not None:
                return
            cur = await conn.execute(_IS_DEFAULT, (name,))
            stored_default = await cur.fetchone() is not None
        if stored_default or name in self.configured:
            raise RecipeReadOnly(f"{name!r} is an operator default: it cannot be deleted"
                                 " through the API", field="name")
        raise NotFound(f"no expand recipe named {name!r}", field="name")
