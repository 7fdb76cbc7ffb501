"""Graph routes: entity find, link find, expansion around one or many objects, and named expand
recipes."""

from __future__ import annotations

from fastapi import APIRouter

from api.dependencies import Ns, Svc
from api.errors import ERRORS
from api.routes import page
from api.schemas import (
    ExpandBody,
    ExpandManyBody,
    FindLinksBody,
    FindObjectsBody,
    PageOut,
    RecipeBody,
    RecipeRunBody,
)
from pipeline.domain.read_model import ExpandQuery, Filters

router = APIRouter(tags=["graph"], responses=ERRORS)


@router.post("/v1/find_objects", response_model=PageOut)
async def find_objects(body: FindObjectsBody, ns: Ns, svc: Svc) -> PageOut:
    """Entity search in the graph (text + vector, RRF), hydrated under the namespace."""
    filters = body.filters.to_filters() if body.filters else Filters()
    return page(await svc.graph.find_objects(ns, body.query, body.kinds or [], filters,
                                             body.limit), "find_objects")


@router.post("/v1/find_links", response_model=PageOut)
async def find_links(body: FindLinksBody, ns: Ns, svc: Svc) -> PageOut:
    """Edge-note text search on one relation type; each hit is the target object with its
    relation (`relation.source_id` is the source)."""
    return page(await svc.graph.find_links(ns, body.relation_type, body.query,
                                           body.limit), "find_links")


@router.post("/v1/expand", response_model=PageOut)
async def expand(body: ExpandBody, ns: Ns, svc: Svc) -> PageOut:
    """Containment and/or graph neighbors of one object (max_hops <= 4), paged."""
    query = ExpandQuery((body.object_id,), tuple(body.relation_types or ()), body.max_hops,
                        body.direction, body.limit, body.want_containment)
    return page(await svc.graph.expand(ns, query), "expand")


@router.post("/v1/expand_many", response_model=PageOut)
async def expand_many(body: ExpandManyBody, ns: Ns, svc: Svc) -> PageOut:
    """Neighbors of many objects within a budget; the first seed to reach one claims it."""
    query = ExpandQuery(tuple(body.object_ids), tuple(body.relation_types or ()),
                        body.max_hops, body.direction, body.limit, body.want_containment,
                        body.neighbor_budget)
    return page(await svc.graph.expand_many(ns, query), "expand_many")


@router.put("/v1/expand/recipes/{name}", response_model=RecipeBody)
async def register_recipe(name: str, body: RecipeBody, ns: Ns, svc: Svc) -> RecipeBody:
    """Register (or replace) a named expand template, shared by every API process."""
    await svc.recipes.put(name, body.model_dump())
    return body


@router.post("/v1/expand/recipe/{name}", response_model=PageOut)
async def run_recipe(name: str, body: RecipeRunBody, ns: Ns, svc: Svc) -> PageOut:
    """Run a registered expand template on one or more objects."""
    spec = RecipeBody.model_validate(await svc.recipes.get(name))
    query = ExpandQuery(tuple(body.object_ids), tuple(spec.relation_types or ()),
                        spec.max_hops, spec.direction, body.limit or spec.limit,
                        spec.want_containment, spec.neighbor_budget)
    if len(body.object_ids) == 1 and spec.neighbor_budget is None:
        return page(await svc.graph.expand(ns, query), "expand_recipe")
    return page(await svc.graph.expand_many(ns, query), "expand_recipe")
