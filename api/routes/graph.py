"""Graph routes: entity find, link find, expansion around one or many objects, and named expand
recipes."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.access import ReadNs, WriteNs
from api.asof_schemas import as_of_point
from api.dependencies import Svc
from api.entity_schemas import FindObjectsOut
from api.errors import ERRORS
from api.routes import PAGE_LINKS, page
from api.schemas import (
    ExpandBody,
    ExpandManyBody,
    FindLinksBody,
    FindObjectsBody,
    PageOut,
    RecipeBody,
    RecipeListOut,
    RecipeOut,
    RecipeRunBody,
)
from pipeline.domain.read_model import ExpandQuery, Filters
from pipeline.retrieval.requests import with_where
from pipeline.retrieval.store.recipes import Recipe

router = APIRouter(tags=["graph"], responses=ERRORS)


@router.post("/v1/find_objects", response_model=FindObjectsOut, responses=PAGE_LINKS,
             response_model_exclude_unset=True)
async def find_objects(body: FindObjectsBody, ns: ReadNs, svc: Svc) -> FindObjectsOut:
    """Entity search in the graph (text + vector, RRF), hydrated under the namespace; with
    `include_entities`, also the extracted entities named like the query (`entities`: exact
    normalised name, alias, or trigram-near)."""
    filters = with_where(body.filters.to_filters() if body.filters else Filters(), body.where)
    found = page(await svc.graph.find_objects(ns, body.query, body.kinds or [], filters,
                                              body.limit), "find_objects")
    entities = (await svc.entities.find(ns, body.query, body.limit)
                if body.include_entities else None)
    return FindObjectsOut.with_entities(found, entities)


@router.post("/v1/find_links", response_model=PageOut, responses=PAGE_LINKS)
async def find_links(body: FindLinksBody, ns: ReadNs, svc: Svc) -> PageOut:
    """Edge-note text search on one relation type; each hit is the target object with its
    relation (`relation.source_id` is the source). With `as_of` and/or `known_at`, over the
    links that held then, as known then, each relation with its `valid_from` / `valid_to`."""
    return page(await svc.graph.find_links(ns, body.relation_type, body.query, body.limit,
                                           as_of_point(body.as_of, body.known_at)),
                "find_links")


@router.post("/v1/expand", response_model=PageOut, responses=PAGE_LINKS)
async def expand(body: ExpandBody, ns: ReadNs, svc: Svc) -> PageOut:
    """Containment and/or graph neighbors of one object (max_hops <= 4), paged. With `as_of`
    and/or `known_at`, the neighbours over the links that held then, as known then."""
    query = ExpandQuery((body.object_id,), tuple(body.relation_types or ()), body.max_hops,
                        body.direction, body.limit, body.want_containment,
                        at=as_of_point(body.as_of, body.known_at))
    return page(await svc.graph.expand(ns, query), "expand")


@router.post("/v1/expand_many", response_model=PageOut, responses=PAGE_LINKS)
async def expand_many(body: ExpandManyBody, ns: ReadNs, svc: Svc) -> PageOut:
    """Neighbors of many objects within a budget; the first seed to reach one claims it.
    `as_of` / `known_at` as for expand."""
    query = ExpandQuery(tuple(body.object_ids), tuple(body.relation_types or ()),
                        body.max_hops, body.direction, body.limit, body.want_containment,
                        body.neighbor_budget, as_of_point(body.as_of, body.known_at))
    return page(await svc.graph.expand_many(ns, query), "expand_many")


@router.put("/v1/expand/recipes/{name}", response_model=RecipeBody)
async def register_recipe(name: str, body: RecipeBody, ns: WriteNs, svc: Svc) -> RecipeBody:
    """Register (or replace) a named expand template of the caller's namespace; one of the
    same name as an operator default shadows it for this namespace only."""
    await svc.recipes.put(ns, name, body.model_dump())
    return body


@router.get("/v1/expand/recipes", response_model=RecipeListOut)
async def list_recipes(ns: ReadNs, svc: Svc) -> RecipeListOut:
    """The expand templates the caller's namespace sees: its own and the operator defaults."""
    return RecipeListOut(recipes=[_recipe_out(r) for r in await svc.recipes.list(ns)])


@router.get("/v1/expand/recipes/{name}", response_model=RecipeOut)
async def read_recipe(name: str, ns: ReadNs, svc: Svc) -> RecipeOut:
    """One expand template as the caller's namespace sees it."""
    return _recipe_out(await svc.recipes.get(ns, name))


@router.delete("/v1/expand/recipes/{name}", status_code=204)
async def delete_recipe(name: str, ns: WriteNs, svc: Svc) -> Response:
    """Delete the caller's own template (an operator default it shadowed is seen again); an
    operator default itself is read-only (403 `recipe_read_only`)."""
    await svc.recipes.delete(ns, name)
    return Response(status_code=204)


@router.post("/v1/expand/recipe/{name}", response_model=PageOut, responses=PAGE_LINKS)
async def run_recipe(name: str, body: RecipeRunBody, ns: ReadNs, svc: Svc) -> PageOut:
    """Run an expand template (the namespace's own, else the default) on one or more
    objects; `as_of` / `known_at` as for expand."""
    spec = RecipeBody.model_validate((await svc.recipes.get(ns, name)).spec)
    query = ExpandQuery(tuple(body.object_ids), tuple(spec.relation_types or ()),
                        spec.max_hops, spec.direction, body.limit or spec.limit,
                        spec.want_containment, spec.neighbor_budget,
                        as_of_point(body.as_of, body.known_at))
    if len(body.object_ids) == 1 and spec.neighbor_budget is None:
        return page(await svc.graph.expand(ns, query), "expand_recipe")
    return page(await svc.graph.expand_many(ns, query), "expand_recipe")


def _recipe_out(recipe: Recipe) -> RecipeOut:
    return RecipeOut(name=recipe.name, source=recipe.source,
                     spec=RecipeBody.model_validate(recipe.spec))
