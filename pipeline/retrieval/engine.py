"""The retrieval engine: hybrid search, exact find, paging and reads, framework-free.

Flow of a search: the candidate channels it is given (`pipeline/retrieval/channels/`: lexical
BM25, trigram, dense by default) run concurrently, fuse by reciprocal rank by name, promote part
hits to their parent with evidence (each hit's parent and its object's time read under the
caller's namespace: `PartSearcher.row_meta`), apply a mild temporal decay, and go to the pager
(`pipeline.retrieval.paging`), which stores the ranked list as a result set so `continue` pages
through the same snapshot and reads the returned page alone. A channel that may be missing
(dense: the embedder is down) degrades the answer with its label (`lexical_only`), never to an
error; any other channel's failure fails the request.

Modes (`SearchQuery.mode`): `hybrid` is the above; `ppr` also runs the PPR stage over the
entity layer (`pipeline/retrieval/ppr/stage.py`) and fuses its objects with the hybrid list
(`pipeline/retrieval/ppr/multihop.py`); `auto` runs PPR from the seeds the query writes as names
(strong seeds, `pipeline/retrieval/ppr/seeds.py`) when it has one, else hybrid. The answer's
`mode` says which ran; `explain` adds how it was ranked.

Per request: `fusion` overrides the channel weights, RRF's k and PPR's knobs
(`pipeline/retrieval/tuning.py`; defaults are the wired values); `rerank` re-orders the fused
best objects with the reranker (`pipeline/retrieval/rerank/`, on by default when one is
configured), labelled `rerank_skipped` when it does not answer in time; `strict` refuses a
degraded answer (`DegradedAnswer`, 503) instead of giving it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pipeline.domain.errors import ChannelDegraded, DegradedAnswer, InvalidInput, NotFound
from pipeline.domain.match_set import plan_facets, plan_sort
from pipeline.domain.read_model import Filters, Hit, Page, RichObject, RowMeta, SearchQuery
from pipeline.domain.vectors import VectorSpace
from pipeline.ports import (
    CatalogSource,
    Channel,
    MatchSetReader,
    ObjectReader,
    PartSearcher,
    QueryEmbedder,
    ResultSetStore,
)
from pipeline.retrieval.channels import standard_channels
from pipeline.retrieval.explain import channel_details, hit_details
from pipeline.retrieval.fusion import (
    Fused,
    Promoted,
    decay_factor,
    fuse_and_promote,
    promote,
    rrf,
)
from pipeline.retrieval.matchset import MatchSetStage, Shape
from pipeline.retrieval.paging import Item, ResultPager
from pipeline.retrieval.ppr.multihop import (
    StageRanks,
    fuse_stages,
    hits_explain,
    plan_explain,
    ppr_explain,
    rerank_stages,
)
from pipeline.retrieval.ppr.stage import (
    EXPLAIN_MAX_HUBS,
    PprResult,
    PprStage,
    RowRef,
    SeedPlan,
)
from pipeline.retrieval.requests import (
    MAX_FILTERS,
    MAX_QUERY_TERMS,
    check_children_page,
    check_filters,
    check_limit,
    query_text,
)
from pipeline.retrieval.rerank import RERANK_SKIPPED, Reranked, RerankStage
from pipeline.retrieval.similar import LikenessSource, VectorSearch, uses_vectors
from pipeline.retrieval.snippets import MAX_SNIPPET_TERMS
from pipeline.retrieval.tuning import Fusion, resolve_fusion


@dataclass(frozen=True)
class EngineConfig:
    candidate_k: int = 50
    rrf_k: int = 10
    decay_lambda: float = 0.002  # per day: a year-old hit keeps about half its score
    evidence_n: int = 3
    max_results: int = 100
    embed_timeout: float = 5.0
    snippet_chars: int = 240
    result_set_max_items: int = 1000  # the most items one stored result set holds
    snippet_max_terms: int = MAX_SNIPPET_TERMS
    max_query_terms: int = MAX_QUERY_TERMS
    max_filters: int = MAX_FILTERS
    # the channels find_exact fuses under its equality matches (no dense: exact means words)
    exact_channels: tuple[str, ...] = ("lexical", "trigram")
    # each channel's vote in the fusion, by name (1 when absent; 0 keeps a channel out)
    channel_weights: tuple[tuple[str, float], ...] = ()
    # RRF's k when the hybrid list and the PPR list are fused (small: see multihop.py)
    ppr_rrf_k: int = 5
    # the PPR list's vote in that fusion (the hybrid list's is 1)
    ppr_list_weight: float = 1.0
    # > 0: PPR re-ranks the hybrid list's best `ppr_rerank_depth` objects instead of RRF
    ppr_rerank_depth: int = 0


class RetrievalEngine:
    """Search, exact find, continue, read and children over one namespace at a time.

    `channels` are the candidate channels `search` fuses, by name (default: lexical, trigram
    and dense over `searcher` and `embed_query`); `find_exact` fuses those named in
    `config.exact_channels`; `reranker` is search's optional second stage.
    """

    def __init__(self, searcher: PartSearcher, reader: ObjectReader,
                 result_sets: ResultSetStore, catalog: CatalogSource,
                 embed_query: QueryEmbedder | None, config: EngineConfig | None = None, *,
                 channels: Sequence[Channel] | None = None,
                 ppr: PprStage | None = None, reranker: RerankStage | None = None,
                 match_sets: MatchSetReader | None = None,
                 likeness: LikenessSource | None = None,
                 vector_space: VectorSpace | None = None) -> None:
        self.searcher = searcher
        self.reader = reader
        self.result_sets = result_sets
        self.catalog = catalog
        self.embed_query = embed_query
        self.config = config or EngineConfig()
        self.ppr = ppr
        self.reranker = reranker
        self.weights = dict(self.config.channel_weights)
        if any(w < 0 for w in self.weights.values()):
            raise ValueError("channel weights must be >= 0")
        if channels is None:
            channels = standard_channels(searcher, embed_query,
                                         embed_timeout=self.config.embed_timeout)
        self.channels: dict[str, Channel] = {c.name: c for c in channels}
        if len(self.channels) != len(channels):
            raise ValueError("two channels share a name")
        # the channels search runs: a channel weighted 0 is not asked at all
        self.fused_channels = [n for n in self.channels if self.weights.get(n, 1.0) > 0]
        missing = [n for n in self.config.exact_channels if n not in self.channels]
        if missing:
            raise ValueError(f"find_exact names channels the engine lacks: {missing}")
        # facets and sorting over the match set (pipeline/retrieval/matchset.py)
        self.match_sets = None if match_sets is None else MatchSetStage(
            match_sets, max_items=self.config.result_set_max_items)
        self.pager = ResultPager(result_sets, reader,
                                 max_items=self.config.result_set_max_items,
                                 snippet_width=self.config.snippet_chars,
                                 snippet_max_terms=self.config.snippet_max_terms)
        # similar_to, a caller's query vector, min_score (pipeline/retrieval/similar.py)
        self.vectors = VectorSearch(self, likeness, vector_space)

    async def validate_filters(self, filters: Filters) -> None:
        """Property filters must name filterable fields of the catalog (when it is not empty)."""
        check_filters(await self.catalog(), filters, max_filters=self.config.max_filters)

    async def shape(self, request: SearchQuery) -> Shape | None:
        """The request's facets and sort, validated against the catalog (None: neither)."""
        if not request.facets and request.sort is None:
            return None
        catalog = await self.catalog()
        facets = plan_facets(request.facets, catalog, request.filters.kinds)
        sort = plan_sort(request.sort, catalog, request.filters.kinds)
        if not facets and sort is None:
            return None
        if self.match_sets is None:
            raise InvalidInput("this server computes no facets or sorted orders",
                               field="facets" if facets else "sort")
        return Shape(request, facets, sort)

    # -- search -----------------------------------------------------------------------------

    def fusion(self, request: SearchQuery) -> Fusion:
        """The request's fusion knobs over the wired ones (422 naming a bad one)."""
        return resolve_fusion(request.fusion, channels=list(self.channels),
                              weights=self.weights, rrf_k=self.config.rrf_k,
                              ppr_rrf_k=self.config.ppr_rrf_k,
                              ppr_list_weight=self.config.ppr_list_weight,
                              ppr=None if self.ppr is None else self.ppr.config)

    def wants_rerank(self, request: SearchQuery) -> bool:
        """Whether this search is re-ranked: as asked, else whenever a reranker is set."""
        if request.rerank and self.reranker is None:
            raise InvalidInput("rerank: this server has no reranker", field="rerank")
        return self.reranker is not None and request.rerank is not False

    async def search(self, namespace: uuid.UUID, request: SearchQuery) -> Page:
        """Search over parts, promoted to their objects: hybrid, or fused with PPR (`mode`)."""
        if request.from_messages and (uses_vectors(request) or self.ppr is None):
            raise InvalidInput("from_messages walks the entity layer from the query's text:"
                               " not with similar_to or vector, and only with a PPR stage",
                               field="from_messages")
        if uses_vectors(request):
            return await self.vectors.search(namespace, request)
        query = query_text(request.query, max_terms=self.config.max_query_terms)
        check_limit(request.limit)
        await self.validate_filters(request.filters)
        shape = await self.shape(request)
        if request.mode != "hybrid" and self.ppr is None:
            raise InvalidInput(f"mode {request.mode!r}: this server has no PPR stage",
                               field="mode")
        fusion = self.fusion(request)
        self.wants_rerank(request)
        # the wired weights ask exactly `fused_channels`: the default search is unchanged
        names = self.fused_channels if request.fusion is None else fusion.channels()
        # messages to walk from make a hybrid search a PPR one (their seeds are strong)
        mode = "ppr" if request.from_messages and request.mode == "hybrid" else request.mode
        if self.ppr is None or mode == "hybrid":
            hits, degrade = await self.candidates(namespace, query, request, names)
            plan = None
        else:
            (hits, degrade), plan = await asyncio.gather(
                self.candidates(namespace, query, request, names),
                self._plan(self.ppr, namespace, query, request.from_messages))
        # auto walks only from the words the query writes as names (strong seeds, seeds.py)
        walk = plan.strong_only() if plan is not None and mode == "auto" else plan
        if plan is None or walk is None or (mode == "auto" and not walk.seeds):
            page = await self.rank_and_page(namespace, query, hits, request.limit, degrade,
                                            mode=None if plan is None else "hybrid",
                                            explain=request.explain, request=request,
                                            fusion=fusion, shape=shape)
            if page.explain is not None:
                page = replace(page, explain={**page.explain, **plan_explain(plan)})
            return page
        return await self._search_ppr(namespace, query, request, hits, degrade, walk, fusion,
                                      shape)

    @staticmethod
    async def _plan(ppr: PprStage, namespace: uuid.UUID, query: str,
                    messages: Sequence[uuid.UUID]) -> SeedPlan:
        """The query's seeds, joined by those of the conversation messages given."""
        plan = await ppr.plan(namespace, query)
        if not messages:
            return plan
        return plan.joined(await ppr.plan_messages(namespace, messages))

    async def _search_ppr(self, namespace: uuid.UUID, query: str, request: SearchQuery,
                          hits: dict[str, list[Hit]], degrade: str | None,
                          plan: SeedPlan, fusion: Fusion, shape: Shape | None = None) -> Page:
        """The hybrid list and the PPR stage's list, fused (`multihop.fuse_stages`)."""
        assert self.ppr is not None
        ids = list(dict.fromkeys(h.id for found in hits.values() for h in found))
        meta = await self.searcher.row_meta(namespace, ids)
        first = fuse_and_promote(hits, meta, k=fusion.rrf_k,
                                 evidence_n=self.config.evidence_n, weights=fusion.weights)
        rows = [RowRef(f.id, meta[f.id].parent_id or f.id, meta[f.id].parent_id is not None)
                for f in rrf(hits, k=fusion.rrf_k, weights=fusion.weights) if f.id in meta]
        result = await self.ppr.rank(namespace, plan, request.filters, request.scope_ids, rows,
                                     config=fusion.ppr, at=request.facts_at)
        missing = [p.id for p in result.parts if p.id not in meta]
        meta |= await self.searcher.row_meta(namespace, missing)
        promoted, ranks = (
            rerank_stages(first, result, depth=self.config.ppr_rerank_depth)
            if self.config.ppr_rerank_depth > 0 else
            fuse_stages(first, result, meta, k=fusion.ppr_rrf_k,
                        evidence_n=self.config.evidence_n,
                        ppr_weight=fusion.ppr_list_weight))
        page, reranked = await self._page(namespace, query, promoted, meta, request.limit,
                                          degrade, mode="ppr", request=request, shape=shape)
        if request.explain:
            page = replace(page, explain=self._explain(
                plan, result, page, ranks, channels=channel_details(hits, meta),
                reranked=reranked, fusion=fusion))
        return page

    def _explain(self, plan: SeedPlan | None, result: PprResult | None, page: Page,
                 ranks: dict[uuid.UUID, StageRanks], *,
                 channels: dict[uuid.UUID, dict[str, dict[str, float]]],
                 reranked: Reranked | None, fusion: Fusion | None) -> dict[str, object]:
        ids = [o.id for o in page.objects]
        ppr_scores = None if result is None else {h.id: h.score for h in result.objects}
        return {**plan_explain(plan), **ppr_explain(result, max_hubs=EXPLAIN_MAX_HUBS),
                "hits": hit_details(hits_explain(ids, ranks), ids, channels=channels,
                                    ppr=ppr_scores,
                                    reranked=None if reranked is None else reranked.scores),
                **({} if fusion is None else {"fusion": fusion.explain()}),
                "rerank": None if reranked is None or self.reranker is None else {
                    "depth": self.reranker.depth, "skipped": reranked.skipped}}

    async def find_exact(self, namespace: uuid.UUID, request: SearchQuery) -> Page:
        """Equality matches first (id, title, property value, quoted phrase), then the fusion of
        `config.exact_channels` (lexical and trigram; no dense)."""
        query = query_text(request.query, max_terms=self.config.max_query_terms)
        check_limit(request.limit)
        await self.validate_filters(request.filters)
        shape = await self.shape(request)
        exact, (hits, degrade) = await asyncio.gather(
            self.searcher.exact_matches(namespace, query, request.filters, request.scope_ids,
                                        self.config.candidate_k),
            self.candidates(namespace, query, request, self.config.exact_channels))
        return await self.rank_and_page(namespace, query, hits, request.limit, degrade,
                                        first=exact, request=replace(request, rerank=False),
                                        shape=shape)

    async def candidates(self, namespace: uuid.UUID, query: str, request: SearchQuery,
                         names: Sequence[str]) -> tuple[dict[str, list[Hit]], str | None]:
        """The named channels' hits, run concurrently, and the degrade label of the answer.

        A channel with a degrade label that raised `ChannelDegraded` is left out and labels the
        answer (the first such label, in `names` order); any other failure is raised (a plain
        `Unavailable`, Postgres down, fails the request rather than mislabel it).
        """
        chosen = [self.channels[name] for name in names]
        results = await asyncio.gather(
            *(c.candidates(namespace, query, request.filters, request.scope_ids,
                           self.config.candidate_k) for c in chosen),
            return_exceptions=True)
        hits: dict[str, list[Hit]] = {}
        degrade = None
        for channel, result in zip(chosen, results, strict=True):
            if isinstance(result, ChannelDegraded) and channel.degrade is not None:
                degrade = degrade or channel.degrade
            elif isinstance(result, BaseException):
                raise result
            else:
                hits[channel.name] = result
        if degrade is not None and request.strict:
            raise DegradedAnswer(degrade)
        return hits, degrade

    async def rank_and_page(self, namespace: uuid.UUID, query: str,
                            channels: dict[str, list[Hit]], limit: int, degrade: str | None,
                            *, first: Sequence[Hit] = (), mode: str | None = None,
                            explain: bool = False, request: SearchQuery | None = None,
                            fusion: Fusion | None = None, shape: Shape | None = None,
                            require: str | None = None, max_items: int | None = None,
                            truncated: bool = False) -> Page:
        """Fuse the channels' hits, promote them to objects with evidence, decay by age and
        return the first page; `first` (exact matches) leads, in its own order. `mode` labels
        the answer; `explain` adds each returned object's fused rank and score, per-channel
        ranks and raw scores; `request` may ask for the reranker (and `strict`); `fusion`
        overrides the wired weights and k; `shape` adds facets and a sorted order. `require`
        names a channel every answered object must have a hit in; `max_items` bounds the
        answer (default `config.max_results`); `truncated` says the channels were cut."""
        ids = list(dict.fromkeys([h.id for h in first]
                                 + [h.id for hits in channels.values() for h in hits]))
        meta = await self.searcher.row_meta(namespace, ids)
        weights = self.weights if fusion is None else fusion.weights
        promoted = fuse_and_promote(channels, meta,
                                    k=self.config.rrf_k if fusion is None else fusion.rrf_k,
                                    evidence_n=self.config.evidence_n, weights=weights)
        if require is not None:
            found = {row.parent_id or row.id for h in channels.get(require, ())
                     if (row := meta.get(h.id)) is not None}
            promoted = [p for p in promoted if p.id in found]
        if first:
            # Exact matches lead, in their own order, above every fused result.
            top = 1.0 + max((p.score for p in promoted), default=0.0)
            leading = promote([_as_fused(h, top + (len(first) - i)) for i, h in
                               enumerate(first)], meta, evidence_n=self.config.evidence_n)
            seen = {p.id for p in leading}
            promoted = leading + [p for p in promoted if p.id not in seen]
        page, reranked = await self._page(namespace, query, promoted, meta, limit, degrade,
                                          mode=mode, request=request, shape=shape,
                                          max_items=max_items, truncated=truncated)
        if not explain:
            return page
        ranks = {p.id: StageRanks(rank, None, p.score) for rank, p in
                 enumerate(promoted, start=1)}
        return replace(page, explain=self._explain(
            None, None, page, ranks, channels=channel_details(channels, meta),
            reranked=reranked, fusion=fusion))

    async def _page(self, namespace: uuid.UUID, query: str, promoted: list[Promoted],
                    meta: dict[uuid.UUID, RowMeta], limit: int, degrade: str | None, *,
                    mode: str | None, request: SearchQuery | None = None,
                    shape: Shape | None = None, max_items: int | None = None,
                    truncated: bool = False) -> tuple[Page, Reranked | None]:
        """Decay the ranked objects by age, re-rank the best when `request` asks for it, apply
        the shape (facets, sort), and hand the list to the pager, which reads the returned
        page alone; with the reranker's outcome (None: not asked). `max_items` bounds the list
        (default `config.max_results`); `truncated`: the channels were cut."""
        bound = max_items or self.config.max_results
        beyond = [p.id for p in promoted[bound:]]
        promoted = promoted[:bound]
        changed = await self._changed(namespace, promoted, meta)
        now = datetime.now(UTC)
        lam = self.config.decay_lambda
        items: list[Item] = [
            {"id": str(p.id), "score": p.score * decay_factor(changed[p.id], now, lam),
             "evidence": [[str(part_id), part_score] for part_id, part_score in p.evidence]}
            for p in promoted if p.id in changed]
        items.sort(key=lambda item: (-float(item["score"]), item["id"]))
        reranked = None
        if request is not None and self.wants_rerank(request) and self.reranker is not None:
            objects, texts = await self._rerank_inputs(namespace, items, meta,
                                                       self.reranker.depth)
            outcome = await self.reranker.rerank(query, items, objects, texts)
            if outcome.skipped and request.strict:
                raise DegradedAnswer(RERANK_SKIPPED)
            items, reranked = outcome.items, outcome
            degrade = degrade or (RERANK_SKIPPED if outcome.skipped else None)
        facets = None
        if shape is not None and self.match_sets is not None:
            candidates = [uuid.UUID(str(item["id"])) for item in items] + beyond
            items, facets, cut = await self.match_sets.apply(
                namespace, query, shape.request, items, candidates, shape.facets, shape.sort)
            truncated = truncated or cut
        page = await self.pager.first_page(namespace, items, limit, kind="search",
                                           degrade=degrade, mode=mode, query=query,
                                           truncated=truncated)
        return (page if facets is None else replace(page, facets=facets)), reranked

    async def _changed(self, namespace: uuid.UUID, promoted: Sequence[Promoted],
                       meta: dict[uuid.UUID, RowMeta]) -> dict[uuid.UUID, datetime]:
        """When each ranked object last changed (its age decays its score): from the row meta
        of the rows that promoted it (searchable rows: their object is visible), else read
        (an object only the PPR stage ranked); an object no longer visible is absent."""
        changed = {row.parent_id or row.id: row.updated_at for row in meta.values()
                   if row.updated_at is not None}
        unknown = [p.id for p in promoted if p.id not in changed]
        if unknown:
            found = await self.reader.hydrate(namespace, unknown)
            changed |= {oid: obj.updated_at for oid, obj in found.items()}
        return changed

    async def _rerank_inputs(self, namespace: uuid.UUID, items: Sequence[Item],
                             meta: dict[uuid.UUID, RowMeta], depth: int
                             ) -> tuple[dict[uuid.UUID, RichObject], dict[uuid.UUID, str | None]]:
        """The reranker's head objects and the texts it may read for them: their evidence
        parts', and their own where the object is a searchable row itself."""
        head = [uuid.UUID(str(item["id"])) for item in items[:depth]]
        parts = [uuid.UUID(str(pid)) for item in items[:depth]
                 for pid, _ in item.get("evidence") or ()]
        texts_of = [*parts, *(oid for oid in head if oid in meta)]
        read = await self.reader.hydrate(namespace, [*head, *parts], content_of=texts_of)
        return ({oid: read[oid] for oid in head if oid in read},
                {rid: read[rid].content for rid in texts_of if rid in read})

    # -- paging and reads ---------------------------------------------------------------------

    async def continue_page(self, namespace: uuid.UUID, result_set_id: str,
                            limit: int = 10) -> Page:
        """The next page of a result set: the same snapshot from any API process."""
        return await self.pager.continue_page(namespace, result_set_id, limit)

    async def read(self, namespace: uuid.UUID, object_id: uuid.UUID) -> RichObject:
        """One visible object with its content; NotFound otherwise."""
        found = await self.reader.hydrate(namespace, [object_id], with_content=True)
        if object_id not in found:
            raise NotFound(f"object {object_id} not found", field="id")
        return found[object_id]

    async def children(self, namespace: uuid.UUID, object_id: uuid.UUID, *, offset: int = 0,
                       limit: int = 100) -> list[RichObject]:
        """The visible parts of a visible object, in order, with their content."""
        check_children_page(offset, limit)
        await self.read(namespace, object_id)  # 404 for what is missing or out of scope
        return await self.reader.children(namespace, object_id, offset=offset, limit=limit)


def _as_fused(hit: Hit, score: float) -> Fused:
    return Fused(hit.id, score, {"exact": 1})
