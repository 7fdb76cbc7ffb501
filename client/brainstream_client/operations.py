"""Every endpoint the client calls, in one table: its HTTP method and path, its body and answer
models, its query parameters, and whether repeating it is harmless. Both clients send through
it, and the test suite checks it against the API's OpenAPI document (every operation of the
API has an entry, with the same body, answer, path and query parameters), so the client cannot
drift from the API unnoticed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from brainstream_client.events import DeleteObjectsBody, DeleteObjectsOut, PublishBody, PublishOut
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
    MemoryOut,
    MemorySearchBody,
    MemorySearchOut,
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
    FindExactBody,
    MeOut,
    ObjectOut,
    PageOut,
    SearchBody,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Operation(Generic[T]):
    """One endpoint and what it answers: `answer` is a model, `dict` (a free-form JSON
    object) or None (no body: 204). `name` is the clients' method. `idempotent`: sending it
    twice does no more than once (reads; writes keyed by ids the client chose), so a request
    that may have arrived is retried too."""

    name: str
    method: str
    path: str
    body: type[BaseModel] | None
    answer: type[T] | None
    query: tuple[str, ...] = ()
    idempotent: bool = True
    # statuses that are answers, not errors (readiness: 503 says what is down)
    answers: tuple[int, ...] = (200, 202, 204)

    def url(self, **params: object) -> str:
        """The path with its parameters filled in (each escaped as one path segment)."""
        return self.path.format(**{k: quote(str(v), safe="") for k, v in params.items()})

    def parse(self, response: httpx.Response) -> T:
        """The answer's body as this operation's answer type."""
        if self.answer is None:
            return cast(T, None)
        if isinstance(self.answer, type) and issubclass(self.answer, BaseModel):
            return cast(T, self.answer.model_validate_json(response.content))
        return cast(T, json.loads(response.content))


# ops (unauthenticated)
HEALTHZ: Operation[dict[str, Any]] = Operation("healthz", "GET", "/healthz", None, dict)
READYZ: Operation[dict[str, Any]] = Operation("readyz", "GET", "/readyz", None, dict,
                                              answers=(200, 503))

# search
SEARCH: Operation[PageOut] = Operation("search", "POST", "/v1/search", SearchBody, PageOut)
FIND_EXACT: Operation[PageOut] = Operation("find_exact", "POST", "/v1/find_exact", FindExactBody,
                                           PageOut)
CONTINUE: Operation[PageOut] = Operation("continue_", "POST", "/v1/continue", ContinueBody, PageOut)

# graph
FIND_OBJECTS: Operation[FindObjectsOut] = Operation("find_objects", "POST", "/v1/find_objects",
                                                    FindObjectsBody, FindObjectsOut)
FIND_LINKS: Operation[PageOut] = Operation("find_links", "POST", "/v1/find_links", FindLinksBody,
                                           PageOut)
EXPAND: Operation[PageOut] = Operation("expand", "POST", "/v1/expand", ExpandBody, PageOut)
EXPAND_MANY: Operation[PageOut] = Operation("expand_many", "POST", "/v1/expand_many",
                                            ExpandManyBody, PageOut)
PUT_RECIPE: Operation[RecipeBody] = Operation("put_recipe", "PUT", "/v1/expand/recipes/{name}",
                                              RecipeBody, RecipeBody)
GET_RECIPE: Operation[RecipeOut] = Operation("get_recipe", "GET", "/v1/expand/recipes/{name}", None,
                                             RecipeOut)
DELETE_RECIPE: Operation[None] = Operation("delete_recipe", "DELETE", "/v1/expand/recipes/{name}",
                                           None, None)
LIST_RECIPES: Operation[RecipeListOut] = Operation("list_recipes", "GET", "/v1/expand/recipes",
                                                   None, RecipeListOut)
RUN_RECIPE: Operation[PageOut] = Operation("run_recipe", "POST", "/v1/expand/recipe/{name}",
                                           RecipeRunBody, PageOut)
PATHS: Operation[PathsOut] = Operation("paths", "POST", "/v1/paths", PathsBody, PathsOut)

# objects
READ: Operation[ObjectOut] = Operation("read", "GET", "/v1/objects/{object_id}", None, ObjectOut)
CHILDREN: Operation[ChildrenOut] = Operation("children", "GET", "/v1/objects/{object_id}/children",
                                             None, ChildrenOut, query=("offset", "limit"))
SCHEMA: Operation[dict[str, Any]] = Operation("schema", "GET", "/v1/schema", None, dict,
                                              query=("kind",))
# history
OBJECT_HISTORY: Operation[ObjectHistoryOut] = Operation(
    "object_history", "GET", "/v1/objects/{object_id}/history", None, ObjectHistoryOut)
LINK_HISTORY: Operation[LinkHistoryOut] = Operation(
    "link_history", "GET", "/v1/links/{link_id}/history", None, LinkHistoryOut)
LINK_HISTORY_BY_ENDS: Operation[LinkHistoryOut] = Operation(
    "link_history_by_ends", "GET", "/v1/links/history", None, LinkHistoryOut,
    query=("from", "type", "to"))

# entities (a merge or a decision applied twice fails the second time: not idempotent)
RESOLVE: Operation[ResolveOut] = Operation("resolve", "POST", "/v1/resolve", ResolveBody,
                                           ResolveOut)
ENTITY: Operation[EntityOut] = Operation("entity", "GET", "/v1/entities/{entity_id}", None,
                                         EntityOut)
ENTITY_FACTS: Operation[FactsOut] = Operation(
    "entity_facts", "GET", "/v1/entities/{entity_id}/facts", None, FactsOut,
    query=("as_of", "known_at"))
MERGE_ENTITIES: Operation[MergeOut] = Operation("merge_entities", "POST", "/v1/entities/merge",
                                                MergeBody, MergeOut, idempotent=False)
DECIDE_PAIR: Operation[DecisionOut] = Operation("decide_pair", "POST",
                                                "/v1/entities/possibly_same/{from_id}/{to_id}",
                                                DecisionBody, DecisionOut, idempotent=False)
ENTITY_MENTIONS: Operation[MentionsOut] = Operation("entity_mentions", "GET",
                                                    "/v1/entities/{entity_id}/mentions", None,
                                                    MentionsOut, query=("limit", "cursor"))
SEARCH_ENTITIES: Operation[EntitySearchOut] = Operation("search_entities", "POST",
                                                        "/v1/entities/search", EntitySearchBody,
                                                        EntitySearchOut)
POSSIBLY_SAME: Operation[PairsOut] = Operation("possibly_same", "GET",
                                               "/v1/entities/possibly_same", None, PairsOut,
                                               query=("status", "limit", "cursor"))

# memory (messages carry their uuids: a repeated write stores them once)
SESSION: Operation[SessionOut] = Operation("session", "GET", "/v1/sessions/{session_id}", None,
                                           SessionOut)
SESSIONS: Operation[SessionsOut] = Operation("sessions", "GET", "/v1/sessions", None, SessionsOut,
                                             query=("user_id", "after", "limit"))
MEMORY: Operation[MemoryOut] = Operation("memory", "GET", "/v1/sessions/{session_id}/memory", None,
                                         MemoryOut, query=("lastn",))
MESSAGES: Operation[MessagesOut] = Operation("messages", "GET",
                                             "/v1/sessions/{session_id}/messages", None,
                                             MessagesOut, query=("after_seq", "limit"))
ADD_MESSAGES: Operation[WriteOut] = Operation("add_messages", "POST",
                                              "/v1/sessions/{session_id}/messages",
                                              PostMessagesBody, WriteOut)
SEARCH_SESSION: Operation[MemorySearchOut] = Operation("search_session", "POST",
                                                       "/v1/sessions/{session_id}/search",
                                                       MemorySearchBody, MemorySearchOut)
SEARCH_MEMORY: Operation[MemorySearchOut] = Operation("search_memory", "POST", "/v1/memory/search",
                                                      UserMemorySearchBody, MemorySearchOut)

# publishing (events carry their ids: a repeated publish is applied once)
PUBLISH: Operation[PublishOut] = Operation("publish", "POST", "/v1/events", PublishBody, PublishOut)
# a retry publishes a second delete, which may match objects put in between: not idempotent
DELETE_OBJECTS: Operation[DeleteObjectsOut] = Operation(
    "delete_objects", "POST", "/v1/objects/delete", DeleteObjectsBody, DeleteObjectsOut,
    idempotent=False)

# the caller's key, and (operator keys only) the operator's status across tenants
ME: Operation[MeOut] = Operation("me", "GET", "/v1/me", None, MeOut)
ADMIN_STATUS: Operation[dict[str, Any]] = Operation("admin_status", "GET", "/v1/admin/status",
                                                    None, dict)


# every operation, for the check against the API document
OPERATIONS: tuple[Operation[Any], ...] = (
    HEALTHZ, READYZ, SEARCH, FIND_EXACT, CONTINUE, FIND_OBJECTS, FIND_LINKS, EXPAND,
    EXPAND_MANY, PUT_RECIPE, GET_RECIPE, DELETE_RECIPE, LIST_RECIPES, RUN_RECIPE, PATHS, READ,
    CHILDREN, SCHEMA, OBJECT_HISTORY, LINK_HISTORY, LINK_HISTORY_BY_ENDS, RESOLVE, ENTITY,
    ENTITY_FACTS, MERGE_ENTITIES, DECIDE_PAIR, ENTITY_MENTIONS, SEARCH_ENTITIES, POSSIBLY_SAME,
    SESSION, SESSIONS, MEMORY,
    MESSAGES, ADD_MESSAGES, SEARCH_SESSION, SEARCH_MEMORY, PUBLISH, DELETE_OBJECTS, ME,
    ADMIN_STATUS,
)
