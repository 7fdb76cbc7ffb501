"""The read tools: one API call each, the arguments passed as the API's body (unset ones left
out, so the API's defaults and bounds apply), the API's JSON answered as is.

No `from __future__ import annotations` here: the SDK reads these functions' signatures to
build each tool's input schema and must see real types, not strings.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from api.mcp.backend import ApiBackend, segment
from api.mcp.guide import filters_text, relations_text

Json = dict[str, Any]
Ids = list[str]

Query = Annotated[str, Field(description="the words to look for")]
Limit = Annotated[int | None, Field(description="results per page (API default if unset)")]
ObjectId = Annotated[str, Field(description="an object id (UUID) from an earlier answer")]
RelationTypes = Annotated[list[str] | None, Field(
    description="only links of these relation types (all when unset)")]
MaxHops = Annotated[int | None, Field(description="how far to walk, 1-4 (default 1)")]
Direction = Annotated[str | None, Field(description='"out", "in" or "both" (default)')]
Strict = Annotated[bool | None, Field(
    description="fail (503 degraded_answer) rather than answer degraded (lexical_only when "
                "the embedder is down, rerank_skipped when the reranker is)")]
Facets = Annotated[list[Json] | None, Field(description=(
    'counts per value over every matching object, beside the hits (first page): e.g.'
    ' [{"field": "kind"}, {"field": "$.stage", "size": 5}, {"field": "$.amount",'
    ' "interval": 1000}, {"field": "$.close_date", "interval": "month"}]'))]
Sort = Annotated[Json | None, Field(description=(
    'order every matching object (up to 1,000) instead of by relevance: {"field":'
    ' "updated_at" | "created_at" | "title" | "position" | "$.<property>", "order": "asc" |'
    ' "desc"}; continue pages through it'))]
AsOf = Annotated[str | None, Field(description=(
    "world time, RFC 3339 with an offset (e.g. 2021-06-01T00:00:00Z): the links and relations"
    " holding then (modes ppr / auto for search); default now"))]
KnownAt = Annotated[str | None, Field(description=(
    "system time, RFC 3339 with an offset: as the system knew it then; default now"))]


def body(**values: Any) -> Json:
    """The request body: the arguments given (None means "the API's default")."""
    return {k: v for k, v in values.items() if v is not None}


WHERE_DOC = (
    'Conditions on properties, beside filters: {"jsonpath": "$.price", "gte": 10} with one of '
    "eq, ne, gt, gte, lt, lte, in (a list), exists (true/false), combined by "
    '{"and": [...]}, {"or": [...]}, {"not": {...}} (4 deep, 20 leaves). Numbers compare as '
    "numbers, ISO-8601 dates as instants, strings by code point; the field must be filterable.")


def register_read_tools(server: MCPServer, api: ApiBackend, schema: Json | None) -> None:
    """Add the read tools to `server`; `schema` (the live /v1/schema, or None) describes the
    filters."""
    filters_doc = filters_text(schema)
    Filters = Annotated[Json | None, Field(description=filters_doc)]
    Where = Annotated[Json | None, Field(description=WHERE_DOC)]

    async def search(ctx: Context, query: Annotated[str | None, Field(
            description="what to search for (leave it out with similar_to)")] = None,
            mode: Annotated[str | None, Field(
            description='"hybrid" (default), "ppr" (multi-hop over entities) or "auto"')] = None,
            filters: Filters = None, limit: Limit = None,
            scope_ids: Annotated[Ids | None, Field(
                description="only these objects and their parts")] = None,
            explain: Annotated[bool | None, Field(
                description="add how the answer was ranked: per hit each channel's rank and "
                            "raw score, fused score, PPR and reranker scores")] = None,
            rerank: Annotated[bool | None, Field(
                description="re-order the best hits with the server's reranker (default: on "
                            "when it has one)")] = None,
            strict: Strict = None,
            fusion: Annotated[Json | None, Field(
                description='this search\'s fusion knobs, e.g. {"weights": {"lexical": 2, '
                            '"dense": 0.5}, "rrf_k": 30, "ppr": {"damping": 0.6}} (weights '
                            '0-10 by channel name; unset: the wired values)')] = None,
            facets: Facets = None, sort: Sort = None, where: Where = None,
            similar_to: Annotated[str | None, Field(
                description="an object id: find objects like it (its meaning and its"
                " distinctive words); the object itself is left out")] = None,
            min_score: Annotated[float | None, Field(
                description="only objects at least this similar in meaning (cosine, -1..1;"
                " 0.95 with similar_to finds near-duplicates)")] = None,
            as_of: AsOf = None, known_at: KnownAt = None,
            from_messages: Annotated[Ids | None, Field(
                description="conversation message uuids (from memory_search): also walk from "
                            "the entities they name, to the documents about them")] = None,
            ) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/search", body=body(
            query=query, mode=mode, filters=filters, limit=limit, scope_ids=scope_ids,
            explain=explain, rerank=rerank, strict=strict, fusion=fusion, facets=facets,
            sort=sort, where=where, similar_to=similar_to, min_score=min_score, as_of=as_of,
            known_at=known_at, from_messages=from_messages))
        return result

    async def find_exact(ctx: Context, query: Query, filters: Filters = None,
                         limit: Limit = None, scope_ids: Ids | None = None,
                         strict: Strict = None, facets: Facets = None,
                         sort: Sort = None, where: Where = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/find_exact", body=body(
            query=query, filters=filters, limit=limit, scope_ids=scope_ids, strict=strict,
            facets=facets, sort=sort, where=where))
        return result

    async def find_objects(ctx: Context, query: Query, kinds: Annotated[list[str] | None, Field(
            description="only these kinds")] = None, filters: Filters = None,
            limit: Limit = None, include_entities: Annotated[bool | None, Field(
                description="also the entities named like the query")] = None,
            where: Where = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/find_objects", body=body(
            query=query, kinds=kinds, filters=filters, limit=limit,
            include_entities=include_entities, where=where))
        return result

    async def find_links(ctx: Context, relation_type: Annotated[str, Field(
            description="the links' relation type")], query: Query,
            limit: Limit = None, as_of: AsOf = None, known_at: KnownAt = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/find_links", body=body(
            relation_type=relation_type, query=query, limit=limit, as_of=as_of,
            known_at=known_at))
        return result

    async def expand(ctx: Context, object_id: ObjectId, relation_types: RelationTypes = None,
                     max_hops: MaxHops = None, direction: Direction = None,
                     limit: Limit = None, want_containment: Annotated[bool | None, Field(
                         description="include parts and parents (default true)")] = None,
                     as_of: AsOf = None, known_at: KnownAt = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/expand", body=body(
            object_id=object_id, relation_types=relation_types, max_hops=max_hops,
            direction=direction, limit=limit, want_containment=want_containment, as_of=as_of,
            known_at=known_at))
        return result

    async def expand_many(ctx: Context, object_ids: Annotated[Ids, Field(
            description="up to 100 object ids")], relation_types: RelationTypes = None,
            max_hops: MaxHops = None, direction: Direction = None,
            neighbor_budget: Annotated[int | None, Field(
                description="neighbours explored in all (default 50)")] = None,
            limit: Limit = None, want_containment: bool | None = None, as_of: AsOf = None,
            known_at: KnownAt = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/expand_many", body=body(
            object_ids=object_ids, relation_types=relation_types, max_hops=max_hops,
            direction=direction, neighbor_budget=neighbor_budget, limit=limit,
            want_containment=want_containment, as_of=as_of, known_at=known_at))
        return result

    async def list_recipes(ctx: Context) -> Json:
        result: Json = await api.call(ctx, "GET", "/v1/expand/recipes")
        return result

    async def run_recipe(ctx: Context, name: Annotated[str, Field(
            description="a recipe name from list_recipes")], object_ids: Ids,
            limit: Limit = None, as_of: AsOf = None, known_at: KnownAt = None) -> Json:
        path = f"/v1/expand/recipe/{segment(name, 'name')}"
        result: Json = await api.call(ctx, "POST", path, body=body(
            object_ids=object_ids, limit=limit, as_of=as_of, known_at=known_at))
        return result

    async def next_page(ctx: Context, result_set_id: Annotated[str, Field(
            description="the result_set_id of the page before")], limit: Limit = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/continue", body=body(
            result_set_id=result_set_id, limit=limit))
        return result

    async def read(ctx: Context, object_id: ObjectId) -> Json:
        result: Json = await api.call(ctx, "GET",
                                      f"/v1/objects/{segment(object_id, 'object_id')}")
        return result

    async def children(ctx: Context, object_id: ObjectId, offset: int | None = None,
                       limit: Limit = None) -> Json:
        path = f"/v1/objects/{segment(object_id, 'object_id')}/children"
        result: Json = await api.call(ctx, "GET", path,
                                      params={"offset": offset, "limit": limit})
        return result

    async def schema_tool(ctx: Context, kind: Annotated[str | None, Field(
            description="one kind only")] = None) -> Json:
        result: Json = await api.call(ctx, "GET", "/v1/schema", params={"kind": kind})
        return result

    async def resolve(ctx: Context, query: Annotated[str | None, Field(
            description="one name")] = None, queries: Annotated[list[str] | None, Field(
                description="several names at once")] = None, limit: Limit = None,
            labels: Annotated[list[str] | None, Field(
                description="only entities with these labels")] = None,
            text: Annotated[str | None, Field(
                description="a passage: every entity it names, with spans")] = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/resolve", body=body(
            query=query, queries=queries, limit=limit, labels=labels, text=text))
        return result

    async def paths(ctx: Context, from_ids: Annotated[Ids, Field(
            description="object, entity or message ids the paths start at")],
            to_ids: Annotated[Ids, Field(description="object, entity or message ids they end "
                                                     "at")],
            max_hops: Annotated[int | None, Field(description="1-4 (default 4)")] = None,
            k: Annotated[int | None, Field(description="how many paths (default 3)")] = None,
            as_of: AsOf = None, known_at: KnownAt = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/paths", body=body(
            **{"from": from_ids, "to": to_ids}, max_hops=max_hops, k=k, as_of=as_of,
            known_at=known_at))
        return result

    async def history(ctx: Context, object_id: Annotated[str | None, Field(
            description="an object's id: its versions")] = None,
            link_id: Annotated[str | None, Field(description="a link's id")] = None,
            from_id: Annotated[str | None, Field(
                description="a link's source (with relation_type and to_id)")] = None,
            relation_type: Annotated[str | None, Field(description="the link's type")] = None,
            to_id: Annotated[str | None, Field(description="the link's target")] = None,
            ) -> Json:
        if object_id is not None:
            path = f"/v1/objects/{segment(object_id, 'object_id')}/history"
            result: Json = await api.call(ctx, "GET", path)
        elif link_id is not None:
            result = await api.call(ctx, "GET", f"/v1/links/{segment(link_id, 'link_id')}/history")
        else:
            result = await api.call(ctx, "GET", "/v1/links/history", params={
                "from": from_id, "type": relation_type, "to": to_id})
        return result

    async def entity_facts(ctx: Context, entity_id: Annotated[str, Field(
            description="an entity id (from resolve, read or paths)")],
            as_of: AsOf = None, known_at: KnownAt = None) -> Json:
        path = f"/v1/entities/{segment(entity_id, 'entity_id')}/facts"
        result: Json = await api.call(ctx, "GET", path,
                                      params={"as_of": as_of, "known_at": known_at})
        return result

    tools: list[tuple[Any, str, str]] = [
        (search, "search", "Search the knowledge base with a question or keywords (hybrid "
         "ranking; mode, filters, explain, rerank, strict, fusion, facets, sort). The default "
         "tool for a question. " + filters_doc),
        (find_exact, "find_exact", "Find objects containing the exact words or identifier "
         "(codes, numbers, quoted phrases); same filters as search."),
        (find_objects, "find_objects", "Find objects (and optionally entities) named like the "
         "query, optionally of given kinds; same filters as search."),
        (find_links, "find_links", "Find links of one relation type whose note or metadata "
         "matches the query. " + relations_text(schema)),
        (expand, "expand", "The graph neighbourhood of one object: linked objects (by "
         "relation type, direction, hops) and its parts. " + relations_text(schema)),
        (expand_many, "expand_many", "The neighbourhood of several objects at once, ranked "
         "by how many of them reach each neighbour."),
        (list_recipes, "list_recipes", "The named expand recipes this namespace can run (its "
         "own and the operator's defaults)."),
        (run_recipe, "run_recipe", "Run a named expand recipe from some objects."),
        (next_page, "continue", "The next page of a ranked answer that said has_more: pass "
         "its result_set_id."),
        (read, "read", "One object by id: title, summary, properties, content, entities, "
         "links and evidence."),
        (children, "children", "The parts of an object (its content cut in order), with "
         "their text."),
        (schema_tool, "schema", "The kinds with their fields and filters, and this "
         "namespace's entity labels and edge types: call it before filtering on a kind you "
         "do not know."),
        (resolve, "resolve", "Which entity a name refers to: candidates with confidence and "
         "evidence (query, or queries for several names); or every entity a passage names "
         "(text), with spans."),
        (paths, "paths", "How objects or entities are connected: the best k paths between "
         "`from_ids` and `to_ids`, with the evidence of each edge."),
        (history, "history", "What changed and when: the versions of an object (object_id) "
         "or of a link (link_id, or from_id + relation_type + to_id), each with when it held "
         "in the world (valid_from/valid_to), when it was believed (recorded_at/"
         "invalidated_at) and the event that made it."),
        (entity_facts, "entity_facts", "What held about an entity at a time: its relations "
         "(predicate, the other entity, when each held, the rows stating it), as of a world "
         "time and as the system knew them at a system time (both default to now)."),
    ]
    for fn, name, description in tools:
        server.add_tool(fn, name=name, description=description)
