"""Search by a vector: more like an object (`similar_to`), a caller's query vector (`vector`), and
a cosine floor on the dense channel (`min_score`).

- `similar_to`: the dense channel searches with the object's own vector (its own row's; the mean
  of its parts' while that has none; a part's own for a part) and the lexical
  channel with its most distinctive lexemes (tf x idf: `LikenessSource`, then the lexical
  engine's more-like-this); the object and its parts are never in the answer. It takes no query
  text.
- `vector`: the dense channel's query vector, computed by the caller with the generation's
  model (its name and dimension are checked: 422 naming `vector.model` / `vector.values`); with
  `query` the other channels search its text, without it the dense channel answers alone.
- `min_score`: the dense channel becomes a range search (every row whose cosine similarity
  reaches the floor, up to the result set's size, `EngineConfig.result_set_max_items`, paged by
  `continue`; `truncated` when more reach it), and the answer holds only objects with such a
  row. Without a usable vector (the embedder down, an object not embedded yet) nothing reaches
  it: the answer is empty and labelled `lexical_only`.

These searches are hybrid only (`mode` ppr and auto walk from the entities a query text names).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pipeline.domain.errors import DegradedAnswer, InvalidInput, QueryRequired, Unavailable
from pipeline.domain.read_model import Filters, Hit, Likeness, Page, SearchQuery
from pipeline.domain.vectors import VectorSpace
from pipeline.ports import Channel, PartSearcher, QueryEmbedder
from pipeline.retrieval.channels.dense import LEXICAL_ONLY
from pipeline.retrieval.matchset import Shape
from pipeline.retrieval.requests import check_limit, query_text
from pipeline.retrieval.tuning import Fusion

log = logging.getLogger(__name__)

DENSE = "dense"
LEXICAL = "lexical"


class CoreConfig(Protocol):
    """The engine settings these searches read (`EngineConfig`)."""

    @property
    def candidate_k(self) -> int: ...
    @property
    def result_set_max_items(self) -> int: ...
    @property
    def max_query_terms(self) -> int: ...
    @property
    def embed_timeout(self) -> float: ...


class EngineCore(Protocol):
    """What these searches use of the retrieval engine (`RetrievalEngine`, which holds a
    `VectorSearch` over itself): its channels, searcher, query embedder and settings, and its
    request checks, candidates and paging."""

    @property
    def channels(self) -> dict[str, Channel]: ...
    @property
    def searcher(self) -> PartSearcher: ...
    @property
    def embed_query(self) -> QueryEmbedder | None: ...
    @property
    def config(self) -> CoreConfig: ...
    @property
    def fused_channels(self) -> list[str]: ...

    async def validate_filters(self, filters: Filters) -> None: ...

    def fusion(self, request: SearchQuery) -> Fusion: ...

    async def shape(self, request: SearchQuery) -> Shape | None: ...

    async def candidates(self, namespace: uuid.UUID, query: str, request: SearchQuery,
                         names: Sequence[str]) -> tuple[dict[str, list[Hit]], str | None]: ...

    async def rank_and_page(self, namespace: uuid.UUID, query: str,
                            channels: dict[str, list[Hit]], limit: int, degrade: str | None,
                            *, first: Sequence[Hit] = (), mode: str | None = None,
                            explain: bool = False, request: SearchQuery | None = None,
                            fusion: Fusion | None = None, shape: Shape | None = None,
                            require: str | None = None, max_items: int | None = None,
                            truncated: bool = False) -> Page: ...


class LikenessSource(Protocol):
    """An object's vector and lexemes (`pipeline/retrieval/store/likeness.py`)."""

    async def likeness(self, namespace: uuid.UUID, target: uuid.UUID) -> Likeness:
        """NotFound(field="similar_to") unless `target` is visible in `namespace`."""
        ...


@runtime_checkable
class RangeSearcher(Protocol):
    """The dense channel's range search (`PgPartSearcher.search_dense_within`)."""

    async def search_dense_within(self, namespace: uuid.UUID, vector: Sequence[float],
                                  min_score: float, filters: Filters,
                                  scope_ids: Sequence[uuid.UUID], cap: int
                                  ) -> tuple[list[Hit], bool]: ...


@runtime_checkable
class LikeSearcher(Protocol):
    """The lexical engine's more-like-this (`search_like` on Postgres and Tantivy)."""

    async def search_like(self, namespace: uuid.UUID, terms: Mapping[str, int],
                          filters: Filters, scope_ids: Sequence[uuid.UUID],
                          k: int) -> list[Hit]: ...


def uses_vectors(request: SearchQuery) -> bool:
    """Whether a search asks for any of this module's fields."""
    return (request.similar_to is not None or request.vector is not None
            or request.min_score is not None)


@dataclass(frozen=True)
class _Probe:
    """What the channels search with: the query text (None: none), the dense channel's vector
    (None: no dense channel), more-like-this lexemes, and the rows never to answer."""

    text: str | None
    vector: Sequence[float] | None
    terms: Mapping[str, int]
    exclude: frozenset[uuid.UUID]
    degrade: str | None = None


class VectorSearch:
    """The searches of this module over one engine's channels, pager and configuration."""

    def __init__(self, engine: EngineCore, likeness: LikenessSource | None,
                 space: VectorSpace | None) -> None:
        self.engine = engine
        self.likeness = likeness
        self.space = space
        # resolved once: whether the lexical channel's engine answers more-like-this (else
        # similar_to searches the dense channel alone), and the searcher range searches
        lexical = getattr(engine.channels.get(LEXICAL), "searcher", None)
        self.like = lexical if isinstance(lexical, LikeSearcher) else None
        searcher = engine.searcher
        self.ranges = searcher if isinstance(searcher, RangeSearcher) else None

    async def search(self, namespace: uuid.UUID, request: SearchQuery) -> Page:
        """A search with `similar_to`, `vector` or `min_score` (see the module docstring)."""
        text = self._check(request)
        check_limit(request.limit)
        await self.engine.validate_filters(request.filters)
        fusion = self.engine.fusion(request)
        shape = await self.engine.shape(request)
        probe = await self._probe(namespace, request, text)
        config = self.engine.config
        extra = len(probe.exclude)
        asked = self.engine.fused_channels if request.fusion is None else fusion.channels()
        names = [n for n in asked if n != DENSE]

        async def words() -> tuple[dict[str, list[Hit]], str | None]:
            if probe.text is not None:
                return await self.engine.candidates(namespace, probe.text, request, names)
            if probe.terms and self.like is not None and LEXICAL in names:
                return {LEXICAL: await self.like.search_like(
                    namespace, probe.terms, request.filters, request.scope_ids,
                    config.candidate_k + extra)}, None
            return {}, None

        async def dense() -> tuple[list[Hit], bool] | None:
            if probe.vector is None or DENSE not in asked:
                return None
            return await self._dense(namespace, request, probe.vector, extra)

        (hits, label), ranged_hits = await asyncio.gather(words(), dense())
        degrade = probe.degrade or label
        truncated = False
        if ranged_hits is not None:
            hits[DENSE], truncated = ranged_hits
        hits = {name: [h for h in found if h.id not in probe.exclude]
                for name, found in hits.items()}
        if degrade is not None and request.strict:
            raise DegradedAnswer(degrade)
        ranged = request.min_score is not None
        return await self.engine.rank_and_page(
            namespace, probe.text or "", hits, request.limit, degrade,
            explain=request.explain, request=request, fusion=fusion, shape=shape,
            require=DENSE if ranged else None,
            max_items=config.result_set_max_items if ranged else None, truncated=truncated)

    def _check(self, request: SearchQuery) -> str | None:
        """The query text (None: none given), once the fields' combination is allowed."""
        given = bool(request.query.strip())
        if request.mode != "hybrid":
            field = ("similar_to" if request.similar_to is not None else
                     "vector" if request.vector is not None else "min_score")
            raise InvalidInput(f"{field} searches in mode hybrid only", field="mode")
        if request.similar_to is not None and request.vector is not None:
            raise InvalidInput("give similar_to or vector, not both", field="vector")
        if request.similar_to is not None and given:
            raise InvalidInput("similar_to searches by the object: leave query out",
                               field="query")
        if request.min_score is not None and not -1.0 <= request.min_score <= 1.0:
            raise InvalidInput("min_score is a cosine similarity, between -1 and 1",
                               field="min_score")
        if given:
            return query_text(request.query, max_terms=self.engine.config.max_query_terms)
        if request.similar_to is None and request.vector is None:
            raise QueryRequired("query must not be empty (or give similar_to or vector)",
                                field="query")
        return None

    async def _probe(self, namespace: uuid.UUID, request: SearchQuery,
                     text: str | None) -> _Probe:
        if request.similar_to is not None:
            if self.likeness is None:
                raise InvalidInput("this server cannot search by similar_to",
                                   field="similar_to")
            like = await self.likeness.likeness(namespace, request.similar_to)
            return _Probe(None, like.vector, like.terms, like.exclude,
                          LEXICAL_ONLY if like.vector is None else None)
        if request.vector is not None:
            if self.space is None:
                raise InvalidInput("this server takes no query vector", field="vector")
            values = self.space.check(request.vector.model, request.vector.values,
                                      field="vector")
            return _Probe(text, values, {}, frozenset())
        assert text is not None  # min_score with a query text
        vector = await self._embed(text)
        return _Probe(text, vector, {}, frozenset(), LEXICAL_ONLY if vector is None else None)

    async def _embed(self, text: str) -> Sequence[float] | None:
        """The query's vector, or None when the embedder is missing, down or slow."""
        embed = self.engine.embed_query
        if embed is None:
            return None
        try:
            return await asyncio.wait_for(embed(text), self.engine.config.embed_timeout)
        except (TimeoutError, Unavailable) as exc:
            log.warning("embedder unavailable, answering lexical-only: %s", exc)
            return None

    async def _dense(self, namespace: uuid.UUID, request: SearchQuery,
                     vector: Sequence[float], extra: int) -> tuple[list[Hit], bool]:
        """The dense channel's hits (a range search with `min_score`), and whether the range
        was cut; `extra` more rows than the answer needs (those excluded)."""
        config = self.engine.config
        if request.min_score is None:
            return await self.engine.searcher.search_dense(
                namespace, vector, request.filters, request.scope_ids,
                config.candidate_k + extra), False
        if self.ranges is None:
            raise InvalidInput("this server cannot search by min_score", field="min_score")
        return await self.ranges.search_dense_within(
            namespace, vector, request.min_score, request.filters, request.scope_ids,
            config.result_set_max_items + extra)
