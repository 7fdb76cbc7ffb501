"""The one error hierarchy of brainstream.

Every error carries a stable machine-readable `code`; the API maps codes to HTTP statuses and the
dead-letter topic records the same code and message. Callers test with `isinstance`, never on text.
"""

from __future__ import annotations


class BrainstreamError(Exception):
    """Base of every error the product raises on purpose."""

    code = "internal"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, str]:
        """The JSON shape used by the API and the dead-letter headers."""
        out = {"code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        return out


class ConfigError(BrainstreamError):
    """A setting is missing or malformed."""

    code = "bad_config"


class InvalidInput(BrainstreamError):
    """An event or request does not satisfy its contract."""

    code = "invalid_input"


class NotFound(BrainstreamError):
    """The thing asked for does not exist (or is not visible to the caller)."""

    code = "not_found"


class Unavailable(BrainstreamError):
    """A dependency (database, broker, graph, embedder) cannot be reached right now."""

    code = "unavailable"


class Overloaded(Unavailable):
    """This API process has no room for the request right now (its in-flight cap, or every
    publishing thread busy): retry after `retry_after` seconds. Refused at once, never queued."""

    code = "overloaded"

    def __init__(self, message: str, *, field: str | None = None, retry_after: int = 1) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class TooManyRequests(BrainstreamError):
    """The caller's key is over one of its shares (requests in flight, publishes per second,
    database connections held): retry after `retry_after` seconds."""

    code = "too_many_requests"

    def __init__(self, message: str, *, field: str | None = "Authorization",
                 retry_after: int = 1) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class EngineFailed(BrainstreamError):
    """An engine the product embeds (Tantivy) failed on this request with an internal error of
    its own (a Rust panic): answered 500 with this code, logged with its cause; the process and
    other requests go on."""

    code = "engine_failed"


class ChannelDegraded(Unavailable):
    """An optional search channel's own dependency (the query embedder) cannot answer: the
    answer leaves the channel out and carries the channel's degrade label. What every channel
    shares (Postgres) failing is a plain `Unavailable`, and fails the request."""


class GraphUnavailable(Unavailable):
    """The graph database cannot be reached right now: reads degrade (`graph_unavailable`), the
    relay retries later. Same code as `Unavailable`: to a caller it is a dependency outage."""


class ServiceError(BrainstreamError):
    """An embedded service could not be started, stopped or reached."""

    code = "service_error"


class PortInUse(ServiceError):
    """The port an embedded service must listen on is taken by another process."""

    code = "port_in_use"


class MigrationError(BrainstreamError):
    """A schema migration failed or the database disagrees with the settings."""

    code = "migration_error"


# --- events (schemas/events.py): why an event was refused; the DLQ records the code ---


class PayloadTooLarge(InvalidInput):
    """The raw event is bigger than the configured maximum."""

    code = "payload_too_large"


class MalformedJson(InvalidInput):
    """The raw event is not a single valid UTF-8 JSON document."""

    code = "malformed_json"


class InvalidEnvelope(InvalidInput):
    """The JSON is not a valid CloudEvents 1.0 structured-mode envelope."""

    code = "invalid_envelope"


class UnknownEventType(InvalidInput):
    """The envelope's `type` is not one brainstream handles."""

    code = "unknown_event_type"


class InvalidPayload(InvalidInput):
    """The envelope's `data` does not satisfy the payload model of its type."""

    code = "invalid_payload"


class StructureInvalid(InvalidInput):
    """An object put's `entities` / `relations` do not fit the put: a span outside its field,
    a relation naming no entity of the put, two entities of one name (`field` names which)."""

    code = "structure_invalid"


class UnauthorizedNamespace(BrainstreamError):
    """The event's namespace is bound to publisher keys and the record is not signed by one of
    them: unsigned, a signature that does not match, an unknown key, or a key of other
    namespaces (pipeline/kafka/signing.py)."""

    code = "unauthorized_namespace"


# --- Kafka records (pipeline/ingest/records.py, pipeline/kafka/markers.py) ---


class InvalidRecordTime(InvalidInput):
    """The Kafka record's timestamp is not a time its writes can be stamped with (past 9999)."""

    code = "invalid_record_time"


class ForgedReplayMarker(InvalidInput):
    """The record claims to be a replay marker (its header or its type) but is not one in the
    replay's own format."""

    code = "forged_replay_marker"


# --- kind catalog (pipeline/domain/kinds.py) ---


class InvalidKindSpec(InvalidInput):
    """A kind catalog document, or an apply of one, is refused."""

    code = "invalid_kind_spec"


class UnknownKind(InvalidInput):
    """A put names a kind that the (non-empty) catalog does not declare."""

    code = "unknown_kind"


class MissingRequiredField(InvalidInput):
    """A put lacks a property its kind declares as required."""

    code = "missing_required_field"


class WrongFieldType(InvalidInput):
    """A put carries a property whose value does not match its declared type."""

    code = "wrong_field_type"


class InvalidFilter(InvalidInput):
    """A filter names a property that is not declared filterable (with that operator)."""

    code = "invalid_filter"


class VectorMismatch(InvalidInput):
    """A caller-supplied vector (a put's, or a search's query vector) does not fit the index
    generation: another model name, another dimension, or values that are not finite."""

    code = "vector_mismatch"


class VectorOnParts(InvalidInput):
    """A put carries a vector but its content is cut into several parts: one vector cannot be
    each part's (send the parts as puts with `parent_id`, each with its vector)."""

    code = "vector_on_parts"


# -- write path: rejections that depend on what Postgres already holds ---------------------------


class IdConflict(InvalidInput):
    """The object id, or the id of one of the parts its put derives, already belongs to another
    namespace: that namespace's row is left untouched and the event is refused."""

    code = "id_owned_by_other_namespace"


class ParentNotFound(InvalidInput):
    """An explicit part names a parent that is missing, deleted or outside the namespace."""

    code = "parent_not_found"


class ParentIsPart(InvalidInput):
    """An explicit part names a parent that is itself a part."""

    code = "parent_is_part"


class ObjectNotFound(InvalidInput):
    """A soft delete names an object that does not exist in the namespace."""

    code = "object_not_found"


class LinkEndpointNotFound(InvalidInput):
    """A link endpoint is missing or outside the namespace (the two are not told apart)."""

    code = "link_endpoint_not_found"


class LinkEndpointDeleted(InvalidInput):
    """A link endpoint is soft-deleted."""

    code = "link_endpoint_deleted"


class LinkEndpointIsPart(InvalidInput):
    """A link endpoint is a part; only first-class objects are linked."""

    code = "link_endpoint_is_part"


class LinkNotFound(InvalidInput):
    """A link delete names a link that does not exist."""

    code = "link_not_found"


# -- memory events (pipeline/ingest/memory.py) ------------------------------------------------


class RejectedByDatabase(InvalidInput):
    """Postgres refused the event's data (e.g. a NUL character in text)."""

    code = "rejected_by_database"


class EmbeddingFailed(BrainstreamError):
    """Embedding kept failing after every retry; the object is marked failed."""

    code = "embedding_failed"


class ExtractionFailed(BrainstreamError):
    """Entity extraction of a row kept failing after every retry, or the extractor refused its
    text; the row is marked failed (pipeline/entities/stage.py)."""

    code = "extraction_failed"


class GraphSyncFailed(BrainstreamError):
    """The graph kept refusing an outbox row (not an outage) after every try; the row is marked
    failed and dead-lettered, and the rows behind it go on."""

    code = "graph_sync_failed"


# --- embedders (pipeline/embedding/embedders/): callers retry the first, dead-letter the second ---


class EmbedderUnavailable(Unavailable):
    """The embedder failed transiently (connection, timeout, 429, 5xx); retrying may succeed."""

    code = "embedder_unavailable"


class EmbedderError(BrainstreamError):
    """The embedder failed permanently (4xx, malformed response, wrong dimension)."""

    # Not "embedding_failed": EmbeddingFailed above owns that code (retries exhausted).
    code = "embedder_error"


# --- the search reranker (pipeline/retrieval/rerank/): either failure leaves the fused order


class RerankerUnavailable(Unavailable):
    """The reranker failed transiently (unreachable, a timeout, 429, 5xx)."""

    code = "reranker_unavailable"


class RerankerError(BrainstreamError):
    """The reranker refused the request or answered off its contract (4xx, a malformed body)."""

    code = "reranker_error"


# --- entity extractors (pipeline/entities/extractors/): callers retry the first, isolate the second


class ExtractorUnavailable(Unavailable):
    """The extractor failed transiently (its endpoint unreachable, a timeout, 429, 5xx)."""

    code = "extractor_unavailable"


class ExtractorError(BrainstreamError):
    """The extractor failed permanently: an answer off its contract (not JSON, wrong shape), a
    4xx, or a text it cannot read."""

    code = "extractor_error"


# -- read API ---------------------------------------------------------------------------------


class QueryRequired(InvalidInput):
    """A search needs a non-empty query."""

    code = "query_required"


class InvalidRequest(InvalidInput):
    """A request body or parameter does not match its schema."""

    code = "invalid_request"


class Unauthorized(BrainstreamError):
    """No API key, or one that is not known."""

    code = "unauthorized"


class NamespaceForbidden(BrainstreamError):
    """The key is not bound to the namespace the request names."""

    code = "namespace_forbidden"


class RecipeReadOnly(BrainstreamError):
    """An expand recipe is an operator default: no API key may delete or change it."""

    code = "recipe_read_only"


class TooManyRecipes(InvalidInput):
    """The namespace already holds as many expand recipes as its limit allows."""

    code = "too_many_recipes"


class EntityMerged(InvalidInput):
    """A merge or a pair decision names an entity already merged into another: decide on the
    survivor (`GET /v1/entities/{id}` names it)."""

    code = "entity_merged"


class ScopeRequired(BrainstreamError):
    """The key is bound to the namespace, but not with the scope the request needs (`read` <
    `write` < `admin`, per namespace in `BRAINSTREAM_API_KEYS`)."""

    code = "scope_required"


class OperatorRequired(BrainstreamError):
    """The operator's status (`GET /v1/admin/status`) spans every tenant: it takes a key with
    `operator: true` in `BRAINSTREAM_API_KEYS`, not a tenant's key."""

    code = "operator_required"


class SourceNotAllowed(InvalidInput):
    """An event published through the API has the `source` of its key (`api:<key name>`),
    never one another publisher's ledger entries are kept under."""

    code = "source_not_allowed"


class IdempotencyRequired(InvalidInput):
    """A publish through the API names each event's `id` or sends an `Idempotency-Key`, so a
    retried request sends the same events again and the pipeline applies them once."""

    code = "idempotency_required"


class ResultSetExpired(NotFound):
    """The result set is unknown to this namespace, or its TTL ran out."""

    code = "result_set_not_found"


# -- read API: limits on what one request may cost (docs/operations.md, "Limits: API requests") --


class TooManyTerms(InvalidInput):
    """A query holds more distinct words than `api_max_query_terms`."""

    code = "too_many_terms"


class TooManyFilters(InvalidFilter):
    """A request filters on more properties than `api_max_filters`."""

    code = "too_many_filters"


class QueryTimeout(Unavailable):
    """A read statement ran past the read pool's statement timeout (`api_statement_timeout`)."""

    code = "query_timeout"


class DegradedAnswer(Unavailable):
    """A request with `strict: true` would have been answered degraded (`degrade` names how:
    `lexical_only`, `rerank_skipped`): refused instead, so the caller never silently gets a
    weaker answer. Retry later, or ask without `strict` to take the degraded answer."""

    code = "degraded_answer"

    def __init__(self, degrade: str) -> None:
        super().__init__(f"strict: the answer would be degraded ({degrade}); retry later or "
                         "ask without strict", field="strict")
        self.degrade = degrade
        self.retry_after = 1


# -- conversation memory: extractors and summarisers (pipeline/memory/) ------------------------


