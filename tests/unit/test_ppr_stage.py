"""The PPR stage's logic over an in-memory entity graph: seed matching (exact, alias, fold,
longest match), hubs, the hop bound, the node bound (`truncated`), the frontier bound, weak
seeds, rows ranked per unit of degree. The store's SQL is exercised on the real stack by
tests/entities/test_ppr.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from pipeline.domain.entity_reads import EntityLink, EntityRef, Hop, NameMatch, RowMention
from pipeline.domain.read_model import Filters
from pipeline.entities.names import fold, normalise
from pipeline.retrieval.ppr.stage import PprConfig, PprResult, PprStage, RowRef, SeedPlan

NS = uuid.uuid4()


class MemoryGraph:
    """Entities named in rows (each row its own object), aliases, RELATES links."""

    said: tuple[str, ...] = ()  # the names message uuid 1 says (`message_entities`)

    def __init__(self, rows: dict[str, list[str]], aliases: dict[str, str] | None = None,
                 links: Sequence[tuple[str, str]] = (), extra_rows: int = 0) -> None:
        self.ids = {name: uuid.uuid5(NS, name) for names in rows.values() for name in names}
        self.row_ids = {row: uuid.uuid5(NS, f"row:{row}") for row in rows}
        self.rows = rows
        self.aliases = aliases or {}
        self.links = links
        self.count = {n: sum(n in names for names in rows.values()) for n in self.ids}
        self.live = len(rows) + extra_rows
        self.visible: set[uuid.UUID] | None = None

    def ref(self, name: str) -> EntityRef:
        return EntityRef(self.ids[name], name, self.count[name])

    def mention(self, row: str, name: str) -> RowMention:
        rid = self.row_ids[row]
        return RowMention(rid, rid, False, self.ids[name], self.count[name])

    async def match_names(self, namespace: uuid.UUID, keys: Sequence[str],
                          folds: Sequence[str]) -> list[NameMatch]:
        out = [NameMatch(normalise(n), "exact", self.ref(n)) for n in self.ids
               if normalise(n) in keys]
        out += [NameMatch(a, "alias", self.ref(n)) for a, n in self.aliases.items() if a in keys]
        out += [NameMatch(fold(n), "fold", self.ref(n)) for n in self.ids if fold(n) in folds]
        return out

    async def live_rows(self, namespace: uuid.UUID) -> int:
        return self.live

    async def message_entities(self, namespace: uuid.UUID, message_ids: Sequence[uuid.UUID]
                               ) -> list[tuple[str, EntityRef]]:
        """A message here names the entities whose names its uuid's position lists."""
        return [(name, self.ref(name)) for name in self.said if uuid.UUID(int=1) in message_ids]

    async def hop(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                  row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int) -> Hop:
        rows_of = []
        for name, eid in self.ids.items():
            if eid in entity_ids:
                rows_of += [self.mention(r, name) for r, names in sorted(self.rows.items())
                            if name in names][:per_entity]
        entities_of = [self.mention(r, n) for r, names in self.rows.items()
                       if self.row_ids[r] in row_ids for n in names]
        links = [EntityLink(self.ids[a], self.ids[b], "RELATES", None, self.count[a],
                            self.count[b]) for a, b in self.links
                 if self.ids[a] in entity_ids or self.ids[b] in entity_ids]
        return Hop(rows_of, entities_of, links[:link_limit])

    async def visible_objects(self, namespace: uuid.UUID, object_ids: Sequence[uuid.UUID],
                              filters: Filters, scope_ids: Sequence[uuid.UUID]
                              ) -> set[uuid.UUID]:
        return set(object_ids) if self.visible is None else self.visible & set(object_ids)


def _run(stage: PprStage, query: str, first: Sequence[RowRef] = (),
         filters: Filters | None = None) -> tuple[SeedPlan, PprResult]:
    async def go() -> tuple[SeedPlan, PprResult]:
        plan = await stage.plan(NS, query)
        return plan, await stage.rank(NS, plan, filters or Filters(), (), first)
    return asyncio.run(go())


# a chain: A -r1- B -r2- C -r3- D -r4- E ; Hub in every row. With 26 more live rows, the hub
# limit is 3 rows: Hub (4) is a hub, the rest (1 or 2) are not.
HUB_PADDING = 26
CHAIN = {"r1": ["Alpha Corp", "Beta Labs", "Hub"], "r2": ["Beta Labs", "Gamma", "Hub"],
         "r3": ["Gamma", "Delta", "Hub"], "r4": ["Delta", "Epsilon", "Hub"]}


def test_three_hops_reach_the_bridging_row_and_no_further() -> None:
    graph = MemoryGraph(CHAIN, extra_rows=HUB_PADDING)
    plan, result = _run(PprStage(graph, PprConfig(hub_min_rows=0)), "Who founded Alpha Corp?")
    assert [s.entity.name for s in plan.seeds] == ["Alpha Corp"]
    reached = {h.id for h in result.objects}
    # seed -> r1 -> Beta Labs -> r2; r3 would be a fifth hop
    assert reached == {graph.row_ids["r1"], graph.row_ids["r2"]}
    assert result.hops == 3 and not result.truncated
    assert result.objects[0].id == graph.row_ids["r1"]


def test_a_hub_is_never_a_seed_nor_walked() -> None:
    graph = MemoryGraph(CHAIN, extra_rows=HUB_PADDING)
    plan, result = _run(PprStage(graph, PprConfig(hub_min_rows=0)), "Hub and Gamma")
    assert [s.entity.name for s in plan.seeds] == ["Gamma"]
    assert [h.name for h in plan.hubs] == ["Hub"]
    assert graph.ids["Hub"] in {h.id for h in result.hubs}
    assert result.entities == 3  # Gamma, Beta Labs, Delta: never Hub
    # with the floor of rows, a small namespace keeps its shared entities
    plan, _ = _run(PprStage(graph, PprConfig(hub_min_rows=20)), "Hub and Gamma")
    assert {s.entity.name for s in plan.seeds} == {"Hub", "Gamma"}


def test_longest_match_alias_and_fold() -> None:
    graph = MemoryGraph({"r1": ["New York", "New York Times"], "r2": ["Zürich Bank"]},
                        aliases={"nyt": "New York Times"}, extra_rows=50)
    stage = PprStage(graph, PprConfig())
    plan, _ = _run(stage, "the New York Times building")
    assert [(s.entity.name, s.method) for s in plan.seeds] == [("New York Times", "exact")]
    plan, _ = _run(stage, "what did NYT print")
    assert [(s.entity.name, s.method) for s in plan.seeds] == [("New York Times", "alias")]
    plan, _ = _run(stage, "zurich-bank profits")
    assert [(s.entity.name, s.method) for s in plan.seeds] == [("Zürich Bank", "fold")]


def test_node_bound_truncates() -> None:
    rows = {f"r{i}": ["Star", f"Leaf {i}"] for i in range(30)}
    graph = MemoryGraph(rows, extra_rows=1000)
    _, result = _run(PprStage(graph, PprConfig(max_nodes=10)), "Star")
    assert result.truncated and result.nodes == 10
    _, result = _run(PprStage(graph, PprConfig(rows_per_entity=5)), "Star")
    assert result.truncated and result.rows == 5


def test_frontier_bound_limits_what_later_hops_expand() -> None:
    rows = {f"r{i}": ["Star", f"Leaf {i}"] for i in range(10)}
    rows |= {f"s{i}": [f"Leaf {i}", f"Far {i}"] for i in range(10)}
    graph = MemoryGraph(rows, extra_rows=1000)
    _, wide = _run(PprStage(graph, PprConfig(frontier=64)), "Star")
    _, narrow = _run(PprStage(graph, PprConfig(frontier=3)), "Star")
    assert wide.rows == 20  # every s-row reached at the third hop
    # 3 of the 10 rows expanded at the second hop, then the 3 best of what is left (rows the
    # seed reaches directly outrank the leaves found through them): no s-row is reached
    assert narrow.rows == 10 and narrow.entities == 1 + 3 + 3
    assert not narrow.truncated


def test_weak_seeds_reach_rows_without_entity_seeds_and_filters_apply() -> None:
    graph = MemoryGraph(CHAIN, extra_rows=40)
    r3 = graph.row_ids["r3"]
    first = [RowRef(r3, r3, False)]
    plan, off = _run(PprStage(graph, PprConfig()), "nothing named here", first)
    assert plan.seeds == () and off.objects == []
    _, on = _run(PprStage(graph, PprConfig(passage_seed_weight=0.05)), "nothing named", first)
    assert on.objects[0].id == r3 and len(on.objects) > 1
    graph.visible = {r3}  # what the store lets a filter keep (without one, all is visible)
    _, kept = _run(PprStage(graph, PprConfig(passage_seed_weight=0.05)), "nothing", first,
                   Filters(kinds=("note",)))
    assert [h.id for h in kept.objects] == [r3]


# The film's row names its director; the director's own page names only her; a busy list names
# her among eight others, each named nowhere else.
DIRECTOR = "Where was Ada Quill born?"
BRIDGE = {"film": ["Moonfall Harbor", "Ada Quill"], "ada": ["Ada Quill"],
          "busy": ["Ada Quill", *(f"Other {i}" for i in range(8))]}


def test_degree_normalised_ranks_the_page_about_the_seed_above_a_busy_row() -> None:
    graph = MemoryGraph(BRIDGE, extra_rows=100)
    _, raw = _run(PprStage(graph, PprConfig()), DIRECTOR)
    _, normalised = _run(PprStage(graph, PprConfig(degree_normalised=True)), DIRECTOR)
    ada, busy = graph.row_ids["ada"], graph.row_ids["busy"]

    def order(result: PprResult) -> list[uuid.UUID]:
        return [h.id for h in result.objects if h.id in (ada, busy)]

    # raw PPR: the busy row keeps the mass its eight one-row entities hand back
    assert order(raw) == [busy, ada]
    assert order(normalised) == [ada, busy]
    assert {h.id for h in normalised.objects} == {h.id for h in raw.objects}


def test_degree_normalised_leaves_a_weak_seeds_own_share_out() -> None:
    # a first-stage row naming nothing: nothing reaches it over an edge, so normalised it is
    # not in the PPR list (the first stage, fused with that list, still has it)
    graph = MemoryGraph(BRIDGE | {"lone": []}, extra_rows=100)
    lone = graph.row_ids["lone"]
    first = [RowRef(lone, lone, False)]
    cfg = PprConfig(passage_seed_weight=0.05)
    _, raw = _run(PprStage(graph, cfg), DIRECTOR, first)
    _, normalised = _run(PprStage(graph, PprConfig(passage_seed_weight=0.05,
                                                   degree_normalised=True)), DIRECTOR, first)
    assert lone in {h.id for h in raw.objects}  # its own restart share
    assert lone not in {h.id for h in normalised.objects}
    assert {h.id for h in normalised.objects} == {h.id for h in raw.objects} - {lone}


def test_messages_seed_the_walk_as_strong_seeds_and_hubs_stay_out() -> None:
    graph = MemoryGraph(CHAIN, extra_rows=HUB_PADDING)
    graph.said = ("Gamma", "Hub")
    stage = PprStage(graph, PprConfig(hub_min_rows=0))
    said = asyncio.run(stage.plan_messages(NS, [uuid.UUID(int=1)]))
    assert [(s.entity.name, s.method, s.strong) for s in said.seeds] == [
        ("Gamma", "message", True)]
    assert said.seeds[0].weight == 1.0 / graph.count["Gamma"]
    assert [h.name for h in said.hubs] == ["Hub"]
    # joined to the query's plan: the query's seeds first, none twice
    asked = asyncio.run(stage.plan(NS, "Who founded Alpha Corp and Gamma?"))
    joined = asked.joined(said)
    assert [s.entity.name for s in joined.seeds] == ["Alpha Corp", "Gamma"]
    assert [s.method for s in joined.seeds] == ["exact", "exact"]
    assert asyncio.run(stage.plan_messages(NS, [uuid.uuid4()])).seeds == ()
