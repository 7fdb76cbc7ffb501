"""`Client`: the synchronous client, one method per endpoint (`operations.py`), plus paging
iterators and the publisher helper. `aio.AsyncClient` is the same with `await`."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar
from uuid import UUID

import httpx
from pydantic import BaseModel

from brainstream_client import operations as ops
from brainstream_client._core import answer, connection, prepare, retry_wait
from brainstream_client.errors import ConnectionFailed
from brainstream_client.events import (
    DeleteObjectsBody,
    DeleteObjectsOut,
    Event,
    PublishBody,
    PublishOut,
)
from brainstream_client.models.entities import (
    DecisionBody,
    DecisionOut,
    EntityOut,
    EntitySearchBody,
    EntitySearchOut,
    MentionsOut,
    MergeBody,
    MergeOut,
    PairsOut,
    ResolveBody,
    ResolveOut,
)
from brainstream_client.models.facts import FactsOut
from brainstream_client.models.graph import (
    Direction,
    ExpandBody,
    ExpandManyBody,
    FindLinksBody,
    FindObjectsBody,
    FindObjectsOut,
    PathsBody,
    PathsOut,
    RecipeBody,
    RecipeListOut,
    RecipeOut,
    RecipeRunBody,
)
from brainstream_client.models.history import LinkHistoryOut, ObjectHistoryOut
from brainstream_client.models.memory import (
    Channel,
    MemoryOut,
    MemorySearchBody,
    MemorySearchOut,
    MessageBody,
    MessageOut,
    MessagesOut,
    PostMessagesBody,
    SessionOut,
    SessionsOut,
    UserMemorySearchBody,
    WriteOut,
)
from brainstream_client.models.read import (
    ChildrenOut,
    ContinueBody,
    FacetBody,
    FiltersBody,
    FindExactBody,
    FusionBody,
    MeOut,
    ObjectOut,
    PageOut,
    RichObjectOut,
    SearchBody,
    SearchMode,
    SortBody,
)
from brainstream_client.retry import RetryPolicy

# the wait between attempts (a module name of its own: tests replace it without touching
# time.sleep for every other thread)
_sleep = time.sleep

T = TypeVar("T")
Id = UUID | str
Filters = FiltersBody | Mapping[str, Any] | None
# a `where` condition tree: {"and": [...]}, {"or": [...]}, {"not": {...}} over leaves
# {"jsonpath": "$.price", "gte": 10}
Where = Mapping[str, Any] | None
Scope = Literal["messages", "summary", "both"]


class Client:
    """The brainstream API over HTTP, for one API key (and namespace).

    `base_url`, `api_key` and `namespace` default to BRAINSTREAM_API_URL (else
    http://127.0.0.1:8000), BRAINSTREAM_API_KEY and BRAINSTREAM_NAMESPACE. 503 and 429
    answers and connection failures are retried by `retry`; other refusals raise `ApiError`.
    Use it as a context manager, or `close()` it.
    """

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 namespace: str | UUID | None = None, timeout: float = 30.0,
                 retry: RetryPolicy | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        url, headers = connection(base_url, api_key, str(namespace) if namespace else None)
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(base_url=url, headers=headers, timeout=timeout,
                                  transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def _call(self, op: ops.Operation[T], *, path: Mapping[str, object] | None = None,
              query: Mapping[str, object] | None = None, body: BaseModel | None = None) -> T:
        url, params, payload = prepare(op, path, query, body)
        retry = 0
        while True:
            try:
                response = self._http.request(op.method, url, params=params, json=payload)
            except httpx.TransportError as exc:
                wait = retry_wait(self.retry, op, retry, error=exc)
                if wait is None:
                    raise ConnectionFailed(f"{op.method} {url}: {exc!r}") from exc
            else:
                wait = retry_wait(self.retry, op, retry, response=response)
                if wait is None:
                    return answer(op, response)
            _sleep(wait)
            retry += 1

    # ops
    def healthz(self) -> dict[str, Any]:
        """Liveness: `{"status": "ok"}`."""
        return self._call(ops.HEALTHZ)

    def readyz(self) -> dict[str, Any]:
        """Readiness: each dependency "ok" or "down" (not ready is an answer, not an error)."""
        return self._call(ops.READYZ)

    def me(self) -> MeOut:
        """This client's key: its name, namespaces with their scopes, and whether it is an
        operator key."""
        return self._call(ops.ME)

    def admin_status(self) -> dict[str, Any]:
        """The operator's status across every tenant (lag, backlogs, dead letters,
        generations); an operator key only (403 `operator_required` otherwise)."""
        return self._call(ops.ADMIN_STATUS)

    # search
    def search(self, query: str | None = None, *, filters: Filters = None, limit: int = 10,
               mode: SearchMode = "hybrid", explain: bool = False,
               scope_ids: Sequence[Id] | None = None, rerank: bool | None = None,
               strict: bool = False,
               fusion: FusionBody | Mapping[str, Any] | None = None,
               facets: Sequence[FacetBody | Mapping[str, Any]] | None = None,
               sort: SortBody | Mapping[str, Any] | None = None,
               where: Where = None, similar_to: Id | None = None,
               min_score: float | None = None,
               vector: Mapping[str, Any] | None = None,
               as_of: datetime | None = None,
               known_at: datetime | None = None,
               from_messages: Sequence[Id] | None = None) -> PageOut:
        """Hybrid search over parts, promoted to their objects with evidence; `rerank`
        (None: on when the server has a reranker), `strict` (an `ApiError` 503
        `degraded_answer` instead of a degraded answer), `fusion` (weights, RRF k, PPR);
        `facets` count the match set's objects per value (`PageOut.facets`, first page),
        `sort` orders it; `where`: conditions on properties (ranges, exists, not, and/or).
        `similar_to`: more like that object (no `query`); `min_score`: a cosine floor on the
        dense channel (a range search); `vector` (`{"model", "values"}`): the dense channel's
        query vector. `as_of` / `known_at` (modes ppr, auto): walk the RELATES facts
        holding at that world time as known at that system time. `from_messages`:
        conversation messages whose entities join the PPR seeds (the documents about what the
        conversation names)."""
        return self._call(ops.SEARCH, body=SearchBody.model_validate(dict(
            query=query, filters=filters, limit=limit, mode=mode, explain=explain,
            scope_ids=scope_ids, rerank=rerank, strict=strict, fusion=fusion, facets=facets,
            sort=sort, where=where, similar_to=similar_to, min_score=min_score,
            vector=vector, as_of=as_of, known_at=known_at,
            from_messages=from_messages)))

    def find_exact(self, query: str, *, filters: Filters = None, limit: int = 10,
                   scope_ids: Sequence[Id] | None = None, strict: bool = False,
                   facets: Sequence[FacetBody | Mapping[str, Any]] | None = None,
                   sort: SortBody | Mapping[str, Any] | None = None,
               where: Where = None) -> PageOut:
        """Equality first (id, title, property value, quoted phrase), then lexical;
        `facets`, `sort` and `where` as in `search`."""
        return self._call(ops.FIND_EXACT, body=FindExactBody.model_validate(dict(
            query=query, filters=filters, limit=limit, scope_ids=scope_ids, strict=strict,
            facets=facets, sort=sort, where=where)))

    def continue_(self, result_set_id: str, *, limit: int = 10) -> PageOut:
        """The next page of a result set (`iter_pages` and `iter_objects` call it)."""
        return self._call(ops.CONTINUE, body=ContinueBody(result_set_id=result_set_id,
                                                           limit=limit))

    # graph
    def find_objects(self, query: str, *, kinds: Sequence[str] | None = None,
                     filters: Filters = None, limit: int = 10,
                     include_entities: bool = False, where: Where = None) -> FindObjectsOut:
        """Objects found in the graph by text and vector; with `include_entities`, the
        entities named like the query too."""
        return self._call(ops.FIND_OBJECTS, body=FindObjectsBody.model_validate(dict(
            query=query, kinds=kinds, filters=filters, limit=limit,
            include_entities=include_entities, where=where)))

    def find_links(self, relation_type: str, query: str, *, limit: int = 10,
                   as_of: datetime | None = None, known_at: datetime | None = None
                   ) -> PageOut:
        """Links of one relation type whose note matches; each hit is the target object
        (`as_of` / `known_at`: the links that held then, as known then)."""
        return self._call(ops.FIND_LINKS, body=FindLinksBody(
            relation_type=relation_type, query=query, limit=limit, as_of=as_of,
            known_at=known_at))

    def expand(self, object_id: Id, *, relation_types: Sequence[str] | None = None,
               max_hops: int = 1, direction: Direction = "both", limit: int = 20,
               want_containment: bool = True, as_of: datetime | None = None,
               known_at: datetime | None = None) -> PageOut:
        """Parts and graph neighbours of one object (`as_of` / `known_at`: over the links
        that held then, as known then)."""
        return self._call(ops.EXPAND, body=ExpandBody.model_validate(dict(
            object_id=object_id, relation_types=relation_types, max_hops=max_hops,
            direction=direction, limit=limit, want_containment=want_containment, as_of=as_of,
            known_at=known_at)))

    def expand_many(self, object_ids: Sequence[Id], *,
                    relation_types: Sequence[str] | None = None, max_hops: int = 1,
                    direction: Direction = "both", neighbor_budget: int = 50,
                    limit: int = 20, want_containment: bool = False,
                          as_of: datetime | None = None, known_at: datetime | None = None
                          ) -> PageOut:
        """Neighbours of many objects within a budget (`as_of` / `known_at` as for
        expand)."""
        return self._call(ops.EXPAND_MANY, body=ExpandManyBody.model_validate(dict(
            object_ids=object_ids, relation_types=relation_types, max_hops=max_hops,
            direction=direction, neighbor_budget=neighbor_budget, limit=limit,
            want_containment=want_containment, as_of=as_of, known_at=known_at)))

    def put_recipe(self, name: str, spec: RecipeBody) -> RecipeBody:
        """Register (or replace) a named expand template of the namespace."""
        return self._call(ops.PUT_RECIPE, path={"name": name}, body=spec)

    def get_recipe(self, name: str) -> RecipeOut:
        """One expand template as the namespace sees it."""
        return self._call(ops.GET_RECIPE, path={"name": name})

    def delete_recipe(self, name: str) -> None:
        """Delete the namespace's own template."""
        self._call(ops.DELETE_RECIPE, path={"name": name})

    def list_recipes(self) -> RecipeListOut:
        """The namespace's templates and the operator's defaults."""
        return self._call(ops.LIST_RECIPES)

    def run_recipe(self, name: str, object_ids: Sequence[Id], *,
                   limit: int | None = None, as_of: datetime | None = None,
                         known_at: datetime | None = None) -> PageOut:
        """Run an expand template on one or more objects (`as_of` / `known_at` as for
        expand)."""
        body = RecipeRunBody.model_validate(dict(object_ids=object_ids, limit=limit,
                                                 as_of=as_of, known_at=known_at))
        return self._call(ops.RUN_RECIPE, path={"name": name}, body=body)

    def paths(self, sources: Sequence[Id], targets: Sequence[Id], *, max_hops: int = 4,
              k: int = 3, as_of: datetime | None = None,
                    known_at: datetime | None = None) -> PathsOut:
        """The `k` best paths from any of `sources` to any of `targets` (objects or
        entities), each edge with its evidence."""
        return self._call(ops.PATHS, body=PathsBody.model_validate(
            {"from": sources, "to": targets, "max_hops": max_hops, "k": k, "as_of": as_of,
             "known_at": known_at}))

    # objects
    def read(self, object_id: Id) -> ObjectOut:
        """One object with its content and the entities it names."""
        return self._call(ops.READ, path={"object_id": object_id})

    def children(self, object_id: Id, *, offset: int = 0, limit: int = 100) -> ChildrenOut:
        """The parts of an object, in order."""
        return self._call(ops.CHILDREN, path={"object_id": object_id},
                          query={"offset": offset, "limit": limit})

    def object_history(self, object_id: Id) -> ObjectHistoryOut:
        """Every version of an object (each put, delete or revival), in order, with its event."""
        return self._call(ops.OBJECT_HISTORY, path={"object_id": object_id})

    def link_history(self, link_id: Id) -> LinkHistoryOut:
        """Every version of a link by its id (a name-based UUID of from, type and to), in the
        order written, with the events that wrote and retired each."""
        return self._call(ops.LINK_HISTORY, path={"link_id": link_id})

    def link_history_by_ends(self, from_id: Id, relation_type: str, to_id: Id
                             ) -> LinkHistoryOut:
        """Every version of the link (from, type, to)."""
        return self._call(ops.LINK_HISTORY_BY_ENDS,
                          query={"from": from_id, "type": relation_type, "to": to_id})

    def schema(self, kind: str | None = None) -> dict[str, Any]:
        """The kinds and their filterable fields, and the namespace's entity labels."""
        return self._call(ops.SCHEMA, query={"kind": kind})

    # entities
    def resolve(self, query: str | None = None, *, queries: Sequence[str] | None = None,
                limit: int | None = None, labels: Sequence[str] | None = None,
                text: str | None = None) -> ResolveOut:
        """Resolve one phrase (`query`) or several (`queries`) to entities; or, with `text`
        (a passage), every entity it names with its spans (`entities`)."""
        return self._call(ops.RESOLVE, body=ResolveBody.model_validate(dict(
            query=query, queries=queries, limit=limit, labels=labels, text=text)))

    def entity(self, entity_id: Id) -> EntityOut:
        """One entity with its aliases and counts (a merged one: its survivor)."""
        return self._call(ops.ENTITY, path={"entity_id": entity_id})

    def entity_facts(self, entity_id: Id, *, as_of: datetime | None = None,
                     known_at: datetime | None = None) -> FactsOut:
        """The entity's RELATES facts holding at `as_of` (world time) as known at `known_at`
        (system time); both default to now."""
        return self._call(ops.ENTITY_FACTS, path={"entity_id": entity_id}, query={
            "as_of": as_of and as_of.isoformat(), "known_at": known_at and known_at.isoformat()})

    def merge_entities(self, from_id: Id, into_id: Id, *, dry_run: bool = False) -> MergeOut:
        """Merge one entity into another (a curator key), or say what would move."""
        return self._call(ops.MERGE_ENTITIES, body=MergeBody.model_validate(
            {"from": from_id, "into": into_id, "dry_run": dry_run}))

    def decide_pair(self, from_id: Id, to_id: Id,
                    decision: Literal["verify", "refuse", "defer"]) -> DecisionOut:
        """Verify (merge), refuse or defer a possibly-same pair (a curator key)."""
        return self._call(ops.DECIDE_PAIR, path={"from_id": from_id, "to_id": to_id},
                          body=DecisionBody(decision=decision))

    def entity_mentions(self, entity_id: Id, *, limit: int = 20,
                    cursor: str | None = None) -> MentionsOut:
        """A page of an entity's mentions in live objects and parts (pass `cursor` on)."""
        return self._call(ops.ENTITY_MENTIONS, path={"entity_id": entity_id},
                          query={"limit": limit, "cursor": cursor})

    def search_entities(self, query: str, *, limit: int = 10,
                    labels: Sequence[str] | None = None) -> EntitySearchOut:
        """Entities named like `query`, best first, with the resolver layer of each."""
        return self._call(ops.SEARCH_ENTITIES, body=EntitySearchBody(
            query=query, limit=limit, labels=list(labels) if labels is not None else None))

    def possibly_same(self, *, status: str = "held", limit: int = 20,
                  cursor: str | None = None) -> PairsOut:
        """A page of POSSIBLY_SAME pairs of one status with their evidence."""
        return self._call(ops.POSSIBLY_SAME,
                          query={"status": status, "limit": limit, "cursor": cursor})

    # memory
    def session(self, session_id: str) -> SessionOut:
        """One live session."""
        return self._call(ops.SESSION, path={"session_id": session_id})

    def sessions(self, *, user_id: str | None = None, after: str | None = None,
                 limit: int = 100) -> SessionsOut:
        """A page of live sessions (of one user), by session id (`iter_sessions` pages)."""
        return self._call(ops.SESSIONS, query={"user_id": user_id, "after": after,
                                               "limit": limit})

    def memory(self, session_id: str, *, lastn: int | None = None) -> MemoryOut:
        """A session's latest summary and recent messages."""
        return self._call(ops.MEMORY, path={"session_id": session_id},
                          query={"lastn": lastn})

    def messages(self, session_id: str, *, after_seq: int = 0,
                 limit: int = 100) -> MessagesOut:
        """A page of a session's messages by seq (`iter_messages` pages)."""
        return self._call(ops.MESSAGES, path={"session_id": session_id},
                          query={"after_seq": after_seq, "limit": limit})

    def add_messages(self, session_id: str,
                     messages: Iterable[MessageBody | Mapping[str, Any]], *,
                     wait: bool = False) -> WriteOut:
        """Add messages to a session (created if new); with `wait`, until stored."""
        return self._call(ops.ADD_MESSAGES, path={"session_id": session_id},
                          body=PostMessagesBody.model_validate(
                              {"messages": list(messages), "wait": wait}))

    def search_session(self, session_id: str, query: str, *, limit: int = 10,
                       search_scope: Scope = "messages",
                       where: Mapping[str, Any] | None = None,
                       since: datetime | None = None, until: datetime | None = None,
                       min_score: float = 0.0, mmr_lambda: float | None = None,
                       context: int = 0, channels: Sequence[Channel] = ("lexical", "dense"),
                       include_knowledge: bool = False) -> MemorySearchOut:
        """Hybrid search (BM25 + dense) over one session's messages and/or summaries, with a
        metadata filter (`where`), a date range, `min_score`, MMR and neighbouring turns."""
        return self._call(ops.SEARCH_SESSION, path={"session_id": session_id},
                          body=MemorySearchBody.model_validate(dict(
                              query=query, limit=limit, search_scope=search_scope,
                              where=where, since=since, until=until, min_score=min_score,
                              mmr_lambda=mmr_lambda, context=context, channels=channels,
                              include_knowledge=include_knowledge)))

    def search_memory(self, user_id: str, query: str, *, limit: int = 10,
                      search_scope: Scope = "messages",
                      where: Mapping[str, Any] | None = None,
                      since: datetime | None = None, until: datetime | None = None,
                      min_score: float = 0.0, mmr_lambda: float | None = None,
                      context: int = 0, channels: Sequence[Channel] = ("lexical", "dense"),
                      include_knowledge: bool = False) -> MemorySearchOut:
        """The same search across every live session of `user_id`; with `include_knowledge`,
        the namespace's documents for the query too (`knowledge`)."""
        return self._call(ops.SEARCH_MEMORY, body=UserMemorySearchBody.model_validate(dict(
            user_id=user_id, query=query, limit=limit, search_scope=search_scope, where=where,
            since=since, until=until, min_score=min_score, mmr_lambda=mmr_lambda,
            context=context, channels=channels, include_knowledge=include_knowledge)))

    # publishing
    def publish(self, events: Iterable[Event], *, wait: bool = False) -> PublishOut:
        """Publish put / soft delete / link events (build them with `brainstream_client.
        events`); with `wait`, answer once the pipeline applied them all (else each stays
        `accepted`). One invalid event refuses the whole request: `ApiError` naming it."""
        return self._call(ops.PUBLISH, body=PublishBody(events=list(events), wait=wait))

    def delete_objects(self, *, source: str | None = None, filters: Filters = None,
                       where: Where = None, all: bool = False, dry_run: bool = False,
                       wait: bool = False) -> DeleteObjectsOut:
        """Soft-delete the namespace's objects whose last put came from `source` and/or that
        match `filters` and/or `where` (`all=True`, alone: every object), as one event: it
        deletes what matches when the pipeline applies it, at most `limit` (send again while
        `matched` is above it). `dry_run` only counts. Takes the `write` scope."""
        return self._call(ops.DELETE_OBJECTS, body=DeleteObjectsBody.model_validate(dict(
            source=source, filters=filters, where=where, all=all, dry_run=dry_run, wait=wait)))

    # paging
    def iter_pages(self, first: PageOut, *, limit: int = 10) -> Iterator[PageOut]:
        """`first`, then each next page of its result set, `limit` objects a page."""
        page = first
        yield page
        while page.has_more and page.result_set_id:
            page = self.continue_(page.result_set_id, limit=limit)
            yield page

    def iter_objects(self, first: PageOut, *, limit: int = 10) -> Iterator[RichObjectOut]:
        """Every object of `first`'s result set, in rank order, fetching pages as needed."""
        for page in self.iter_pages(first, limit=limit):
            yield from page.objects

    def iter_messages(self, session_id: str, *, after_seq: int = 0,
                      limit: int = 100) -> Iterator[MessageOut]:
        """Every message of a session after `after_seq`, by seq, `limit` a request."""
        cursor: int | None = after_seq
        while cursor is not None:
            page = self.messages(session_id, after_seq=cursor, limit=limit)
            yield from page.messages
            cursor = page.next_after_seq

    def iter_sessions(self, *, user_id: str | None = None,
                      limit: int = 100) -> Iterator[SessionOut]:
        """Every live session (of one user), by session id, `limit` a request."""
        after: str | None = None
        while True:
            page = self.sessions(user_id=user_id, after=after, limit=limit)
            yield from page.sessions
            if page.next_after is None:
                return
            after = page.next_after

