"""The fairness benchmark's data and tenants: HotpotQA passages as documents, LoCoMo sessions as
conversation memory, the two tenants' namespaces and API keys, and the requests each sends.

Everything is deterministic: the same run options give the same namespaces, object ids, message
ids, sessions and query order. Tenant B owns one namespace; tenant A owns a main namespace like
B's plus `small` namespaces of a few passages each, all on one key, so that its `auto` searches
can rotate over namespaces the API has no PPR snapshot of yet.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.memory import data as locomo
from bench.quality.data import load_hotpot
from schemas.events import wrap_bare_object

SOURCE = "bench.fairness"
KIND = "doc"
_ROOT = "brainstream-bench/fairness"


@dataclass(frozen=True)
class Tenant:
    """One tenant: its API key, its namespaces (the first is its main one, which holds its
    documents and sessions) and the user its sessions belong to."""

    name: str
    key: str
    namespaces: tuple[uuid.UUID, ...]
    user_id: str

    @property
    def main(self) -> uuid.UUID:
        return self.namespaces[0]


def namespace(tenant: str, index: int) -> uuid.UUID:
    """The deterministic id of a tenant's namespace number `index` (0: its main one)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{_ROOT}/{tenant}/{index}")


def tenants(small_namespaces: int) -> tuple[Tenant, Tenant]:
    """Tenant A (the hostile one: main namespace plus `small_namespaces`) and tenant B."""
    a = Tenant("a", "fairness-key-a",
               tuple(namespace("a", i) for i in range(small_namespaces + 1)), "user-a")
    b = Tenant("b", "fairness-key-b", (namespace("b", 0),), "user-b")
    return a, b


def api_keys_setting(grants: Sequence[Tenant]) -> str:
    """BRAINSTREAM_API_KEYS for the tenants' keys, each allowed to read and write every one of
    its namespaces (A publishes), with the default per-key limits: the worst a tenant is
    allowed is what an ordinary write key may do."""
    return json.dumps({t.key: {"name": f"fairness-{t.name}",
                               "scopes": {str(ns): ["write"] for ns in t.namespaces}}
                       for t in grants})


# -- documents -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Passage:
    title: str
    text: str


def passages() -> list[Passage]:
    """HotpotQA's 994 passages in file order."""
    return [Passage(title, text) for title, text in load_hotpot().docs.values()]


@dataclass(frozen=True)
class Corpus:
    """Which passages each namespace holds."""

    by_namespace: dict[uuid.UUID, list[Passage]]

    @property
    def documents(self) -> int:
        return sum(len(docs) for docs in self.by_namespace.values())


def corpus(a: Tenant, b: Tenant, docs: int, small_docs: int) -> Corpus:
    """B's main namespace gets the first `docs` passages, A's main the next `docs`, and each of
    A's small namespaces `small_docs` of the ones after (wrapping around the corpus: a passage
    in two namespaces is two objects)."""
    source = passages()
    if 2 * docs > len(source):
        raise ValueError(f"at most {len(source) // 2} documents per tenant")
    out = {b.main: source[:docs], a.main: source[docs:2 * docs]}
    for i, ns in enumerate(a.namespaces[1:]):
        start = 2 * docs + i * small_docs
        out[ns] = [source[(start + j) % len(source)] for j in range(small_docs)]
    return Corpus(out)


def put_events(corpus: Corpus) -> list[dict[str, Any]]:
    """One `object.put` per document, its id derived from the namespace and the title."""
    events = []
    for ns, docs in corpus.by_namespace.items():
        for doc in docs:
            data = {"id": str(uuid.uuid5(ns, doc.title)), "kind": KIND, "title": doc.title,
                    "content": doc.text}
            events.append(wrap_bare_object(data, ns, SOURCE, event_id=f"{ns}:{doc.title}"))
    return events


def publish_body(docs: Sequence[Passage], serial: str) -> bytes:
    """A POST /v1/events body of new documents (ids from `serial`, unique per request) that
    waits for the pipeline to apply them: what A's publishing loops send."""
    events = [{"type": "brainstream.object.put", "id": str(uuid.uuid5(uuid.NAMESPACE_URL,
                                                                       f"{serial}/{i}")),
               "data": {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{serial}/object/{i}")),
                        "kind": KIND, "title": f"{doc.title} ({serial})", "content": doc.text}}
              for i, doc in enumerate(docs)]
    return json.dumps({"events": events, "wait": True}).encode()


# -- conversation memory ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sessions:
    """The LoCoMo sessions each tenant gets (the same in both: half from each dev
    conversation), and the questions asked of them."""

    turns: dict[str, list[locomo.Turn]]
    questions: list[str]

    @property
    def messages(self) -> int:
        return sum(len(t) for t in self.turns.values())


def sessions(count: int) -> Sessions:
    """`count` sessions: the first ceil(count/2) of the first dev conversation, the rest from
    the second; the questions of both conversations."""
    conversations, questions = locomo.load()
    first, second = conversations[0], conversations[1]
    take = {first.user_id: (count + 1) // 2, second.user_id: count // 2}
    turns: dict[str, list[locomo.Turn]] = {}
    for conv in (first, second):
        for sid in list(conv.sessions)[:take[conv.user_id]]:
            turns[sid] = conv.sessions[sid]
    return Sessions(turns, [q.text for q in questions])


def _envelope(ns: uuid.UUID, event_type: str, event_id: str,
              data: dict[str, Any]) -> dict[str, Any]:
    return {"specversion": "1.0", "id": event_id, "source": SOURCE,
            "type": f"brainstream.{event_type}",
            "time": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "datacontenttype": "application/json", "namespace": str(ns), "data": data}


def session_events(tenant: Tenant, chosen: Sessions) -> list[dict[str, Any]]:
    """The tenant's sessions (`session.put` with its user) and their messages, 100 a
    `messages.add`, message ids derived from the namespace and the turn."""
    ns = tenant.main
    events = []
    for sid, turns in chosen.turns.items():
        events.append(_envelope(ns, "session.put", f"{ns}:{sid}",
                                {"session_id": sid, "user_id": tenant.user_id}))
        for start in range(0, len(turns), 100):
            messages = [locomo.message_payload(t) | {"uuid": str(uuid.uuid5(ns, t.uuid))}
                        for t in turns[start:start + 100]]
            events.append(_envelope(ns, "messages.add", f"{ns}:{sid}:{start}",
                                    {"session_id": sid, "messages": messages}))
    return events


# -- what each tenant asks -------------------------------------------------------------------


def search_body(query: str, mode: str) -> bytes:
    """A POST /v1/search body."""
    return json.dumps({"query": query, "mode": mode, "limit": 10}).encode()


def memory_search_body(tenant: Tenant, question: str) -> bytes:
    """The costliest memory search a caller may send across its user's sessions: messages and
    summaries, both channels, each hit with neighbouring turns (several statements in parallel
    per request)."""
    return json.dumps({"user_id": tenant.user_id, "query": question, "limit": 50,
                       "search_scope": "both", "channels": ["lexical", "dense"],
                       "context": 3}).encode()


def steady_queries(docs: list[Passage]) -> list[tuple[str, bytes]]:
    """B's requests, in order: `auto` (PPR when the query names an entity, as a title does)
    and plain hybrid searches alternating over its own titles and HotpotQA questions whose
    passages it holds."""
    hotpot = load_hotpot()
    titles = {d.title for d in docs}
    questions = [text for qid, text in hotpot.queries.items()
                 if set(hotpot.qrels[qid]) <= titles]
    texts = [t for pair in zip(questions, [d.title for d in docs], strict=False)
             for t in pair] + [d.title for d in docs[len(questions):]]
    return [(mode, search_body(text, mode)) for i, text in enumerate(texts)
            for mode in (("auto", "hybrid") if i % 2 == 0 else ("hybrid", "auto"))]
