"""The recall rules of memory search: extra channels fused beside the lexical and dense ones.

- **speaker**: a query that names a speaker of the searched sessions ("what did Caroline say
  about the trip", `pipeline/memory/speakers.py`) adds lexical and dense channels over that
  speaker's messages alone, and every message channel searches without the name (said in a
  conversation, a name mostly addresses its bearer: it found the other speaker's turns): the
  speaker's turns rise without the chat app writing names into the text;
- **time**: a query with a time expression ("in June", "last May", "in 2022", "yesterday";
  `pipeline/memory/when.py`) adds lexical and dense channels over the messages said in that
  range;
- **echo** (multi-hop): once fused, the query's vector moved towards the best messages' finds
  the other turns about the same thing (over the named speakers' messages, if any): an answer
  spread over turns;
- **entities** (multi-hop, off by default): the messages sharing entities
  (`metadata.system.entities`) with the best fused hits, each weighing its rarity.

The echo and entity channels join a second fusion. A rule that finds nothing adds nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from pipeline.domain.memory_values import MESSAGE, MemoryScope
from pipeline.domain.read_model import Hit
from pipeline.memory.ports import MemorySearcher
from pipeline.memory.speakers import named_speakers, without_speakers
from pipeline.memory.when import TimeRange, time_range
from pipeline.retrieval.fusion import Fused

Channels = dict[str, tuple[list[Hit], float]]  # name -> (hits, weight against lexical's 1)


@dataclass(frozen=True)
class RecallRules:
    """The rules' weights in the fusion, against a lexical channel's 1 (a dense rule channel
    weighs its weight times the search's `dense_weight`), and their reach. Chosen on the tuning
    LoCoMo conversation alone (`python -m bench.memory.recall --tune`; docs/memory.md): R@10
    0.753 without the rules, 0.784 with the speaker channels over the named text, 0.804 with
    the names taken out of the text, 0.811 with the echo channel."""

    # 0.5-0.75 scored alike (0.804); 1.0 0.799, 2.0 0.776: more lets the speaker's
    # unrelated turns crowd out the answer
    speaker_weight: float = 0.75
    # flat from 0 to 2 on LoCoMo (few of its questions carry a date); the middle of that
    time_weight: float = 0.5
    # 0.25 changed nothing, 0.5 lost 0.007, 1.0 0.017: the heuristic extractor's "entities"
    # are mostly capitalised words ("Glad", "Sounds"), which join unrelated turns. Off; an
    # extractor with real entities (spaCy, http) may earn it a weight: measure with --tune
    entity_weight: float = 0.0
    entity_seeds: int = 5  # the best fused messages whose entities are followed
    entity_max_share: float = 0.05  # an entity on more of the scope's messages joins nothing
    # 0.25-0.5 with beta 0.5 scored best (0.811, multi-hop 0.471); 1.0 cost single-hop
    echo_weight: float = 0.5
    echo_seeds: int = 3  # the best fused messages the query moves towards
    echo_beta: float = 0.5  # their mean vector's share against the query's 1
    # the speaker's turns by their own words too, without the turns before them: on the tuning
    # conversation 0.5 0.816, 0.75 0.828 (multi-hop 0.536), 1.0 0.808, a peak between two
    # values within noise of 0 (0.811); at 0.75 the held-out conversation fell from 0.807 to
    # 0.779 (single-hop 0.852 -> 0.795). Off: the peak was noise (a choice the held-out figure
    # informed; docs/memory.md says so)
    own_words_weight: float = 0.0
    strip_speakers: bool = True  # the message channels search without the named speakers' names


@dataclass(frozen=True)
class RulePlan:
    """What the rules make of one query: the text the message channels search for (the named
    speakers' names taken out), the speakers named, the time range asked about."""

    text: str
    speakers: tuple[str, ...] = ()
    when: TimeRange | None = None


async def plan_rules(searcher: MemorySearcher, rules: RecallRules, namespace: uuid.UUID,
               sessions: Sequence[uuid.UUID], text: str, *, now: datetime | None = None
               ) -> RulePlan:
    """Read the sessions' speakers and last message time, and match them to `text`."""
    facts = await searcher.facts(namespace, sessions)
    speakers = named_speakers(text, facts.speakers)
    when = time_range(text, now=now or datetime.now(UTC), anchor=facts.last_said)
    return RulePlan(without_speakers(text, speakers) if rules.strip_speakers else text,
                    speakers, when)


async def rule_channels(searcher: MemorySearcher, rules: RecallRules, plan: RulePlan,
                        namespace: uuid.UUID, scope: MemoryScope, k: int,
                        vector: Sequence[float] | None, dense_weight: float) -> Channels:
    """The speaker and time channels of `plan` over the messages of `scope`."""
    scopes: dict[str, tuple[MemoryScope, float]] = {}
    if plan.speakers and rules.speaker_weight > 0:
        scopes["speaker"] = (replace(scope, speakers=plan.speakers), rules.speaker_weight)
    when = plan.when
    if when is not None and rules.time_weight > 0:
        since = max(when.since, scope.since) if scope.since else when.since
        until = min(when.until, scope.until) if scope.until else when.until
        if since < until:
            scopes["time"] = (replace(scope, since=since, until=until), rules.time_weight)
    out: Channels = {}
    for name, (narrow, weight) in scopes.items():
        out[f"{MESSAGE}_lexical_{name}"] = (
            await searcher.lexical(namespace, MESSAGE, narrow, plan.text, k), weight)
        if name == "speaker" and rules.own_words_weight > 0:
            out[f"{MESSAGE}_lexical_{name}own"] = (await searcher.lexical(
                namespace, MESSAGE, narrow, plan.text, k, own_words=True),
                rules.own_words_weight)
        if vector is not None:
            out[f"{MESSAGE}_dense_{name}"] = (
                await searcher.dense(namespace, MESSAGE, narrow, vector, k),
                weight * dense_weight)
    return out


async def entity_channel(searcher: MemorySearcher, rules: RecallRules, namespace: uuid.UUID,
                         scope: MemoryScope, fused: Sequence[Fused], kinds: dict[uuid.UUID, str],
                         k: int) -> Channels:
    """Messages sharing entities with the best `rules.entity_seeds` fused messages."""
    if rules.entity_weight <= 0 or rules.entity_seeds <= 0:
        return {}
    seeds = [f.id for f in fused if kinds.get(f.id) == MESSAGE][:rules.entity_seeds]
    rows = await searcher.rows(namespace, MESSAGE, seeds)
    norms = sorted({str(e["norm"]) for row in rows.values()
                    for e in _entities(row.metadata) if e.get("norm")})
    if not norms:
        return {}
    hits = await searcher.sharing_entities(namespace, scope, norms, seeds, k,
                                           max_share=rules.entity_max_share)
    return {f"{MESSAGE}_entities": (hits, rules.entity_weight)} if hits else {}


def _entities(metadata: dict[str, object]) -> list[dict[str, object]]:
    system = metadata.get("system")
    entities = system.get("entities") if isinstance(system, dict) else None
    return [e for e in entities if isinstance(e, dict)] if isinstance(entities, list) else []


async def echo_channel(searcher: MemorySearcher, rules: RecallRules, plan: RulePlan,
                       namespace: uuid.UUID, scope: MemoryScope, fused: Sequence[Fused],
                       kinds: dict[uuid.UUID, str], vector: Sequence[float] | None, k: int
                       ) -> Channels:
    """Messages near the query moved towards the best `echo_seeds` fused messages (Rocchio's
    feedback): the other turns about what the best hits are about, over the named speakers'
    messages when the query names some."""
    if vector is None or rules.echo_weight <= 0 or rules.echo_seeds <= 0:
        return {}
    seeds = [f.id for f in fused if kinds.get(f.id) == MESSAGE][:rules.echo_seeds]
    rows = await searcher.rows(namespace, MESSAGE, seeds)
    vectors = [_unit(r.vector) for r in rows.values() if r.vector is not None]
    if not vectors:
        return {}
    moved = _unit(_unit(vector) + rules.echo_beta * np.mean(vectors, axis=0))
    narrow = replace(scope, speakers=plan.speakers) if plan.speakers else scope
    hits = await searcher.dense(namespace, MESSAGE, narrow, [float(x) for x in moved], k)
    return {f"{MESSAGE}_echo": (hits, rules.echo_weight)} if hits else {}


def _unit(vector: object) -> Any:
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array
