"""An embedding server that fails: retried with backoff when it recovers, dead-lettered when not.

A real OpenAI-compatible `/v1/embeddings` server runs in the test process (backed by the static
embedder, so the stack's 256 dimensions match) and the module's worker is configured with
BRAINSTREAM_EMBEDDER=http against it. The server answers 503 for the first N requests it is told
to fail, or for every request naming a marker, and records every request.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from pipeline.domain.index_text import CONTENT_CAP_CHARS, entity_index_text, part_index_text
from pipeline.embedding.embedders.static import STATIC_DIM, StaticEmbedder
from pipeline.embedding.service import EMBED_RETRY_ATTEMPTS
from pipeline.settings import Settings
from tests.faults.faultutil import (
    ProcSet,
    assert_graph_matches_postgres,
    dead_letters_mentioning,
    graph_node_summary,
    long_content,
    ns_counts,
    publish_fast,
    rows,
    running_procs,
    wait_converged,
)
from tests.httpserve import json_handler, serve
from tests.pipelineutil import put, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.slow]
log = logging.getLogger(__name__)

RETRY_ATTEMPTS = EMBED_RETRY_ATTEMPTS


@dataclass
class EmbeddingServer:
    """The behaviour and the request log of the fake embedding server."""

    fail_next: int = 0  # answer 503 to this many requests, then recover
    fail_marker: str | None = None  # answer 503 to every request with an input naming it
    requests: list[tuple[int, list[str]]] = field(default_factory=list)  # (status, inputs)
    lock: threading.Lock = field(default_factory=threading.Lock)
    embedder: StaticEmbedder = field(default_factory=StaticEmbedder)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        inputs = [str(text) for text in body.get("input", [])]
        with self.lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                status = 503
            elif self.fail_marker and any(self.fail_marker in text for text in inputs):
                status = 503
            else:
                status = 200
            self.requests.append((status, inputs))
            if status != 200:
                return status, {"error": {"message": "model overloaded", "type": "server"}}
            vectors = self.embedder.embed(inputs)
        return 200, {"object": "list", "model": body.get("model") or "static", "data": [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
            for i, vector in enumerate(vectors)]}

    def requests_naming(self, marker: str) -> list[tuple[int, list[str]]]:
        with self.lock:
            return [(s, inputs) for s, inputs in self.requests
                    if any(marker in text for text in inputs)]


def _answer(server: EmbeddingServer, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    if path.rstrip("/") != "/v1/embeddings":
        return 404, {"error": {"message": f"no route {path}"}}
    return server.answer(body)


@pytest.fixture(scope="module")
def embedding_server() -> Iterator[tuple[EmbeddingServer, str]]:
    state = EmbeddingServer()
    with serve(json_handler(functools.partial(_answer, state))) as url:
        yield state, url


@pytest.fixture(scope="module")
def http_procs(fault_catalog: Settings, embedding_server: tuple[EmbeddingServer, str]
               ) -> Iterator[ProcSet]:
    """The pipeline with its worker embedding through the fake server."""
    _, url = embedding_server
    env = {
        "BRAINSTREAM_EMBEDDER": "http",
        "BRAINSTREAM_EMBEDDER_URL": url,
        "BRAINSTREAM_EMBEDDING_DIM": str(STATIC_DIM),
    }
    with running_procs(fault_catalog, "test_embedder_failures", env) as procs:
        yield procs


@pytest.fixture()
def server(embedding_server: tuple[EmbeddingServer, str], http_procs: ProcSet
           ) -> Iterator[EmbeddingServer]:
    state, _ = embedding_server
    yield state
    with state.lock:
        state.fail_next = 0
        state.fail_marker = None


def _index_texts(settings: Settings, ns: uuid.UUID) -> dict[str, str]:
    """Row id -> the text the worker must have embedded for it."""
    out = {}
    for oid, parent, title, summary, props, content, parent_title in rows(
            settings, "SELECT o.id, o.parent_id, o.title, o.summary, o.properties, o.content,"
            " p.title FROM objects o LEFT JOIN objects p ON p.id = o.parent_id"
            " WHERE o.namespace_id = %s AND o.deleted_at IS NULL", ns):
        out[str(oid)] = (entity_index_text(title, summary, props or {}, content,
                                           content_cap_chars=CONTENT_CAP_CHARS)
                         if parent is None else part_index_text(parent_title, content or ""))
    return out


def test_flaky_embedder_is_retried_until_it_recovers(http_procs: ProcSet,
                                                     server: EmbeddingServer) -> None:
    settings = http_procs.settings
    ns = uuid.uuid4()
    marker = f"flaky{uuid.uuid4().hex[:10]}"
    events = [put(ns, kind="company", title=f"{marker} {i}",
                  **({"content": long_content(f"{marker}c{i}")} if i % 3 == 0 else {}))
              for i in range(9)]
    with server.lock:
        first = len(server.requests)
        server.fail_next = RETRY_ATTEMPTS - 1  # one batch may eat them all and still succeed
    publish_fast(settings, [(e, e["data"]["id"]) for e in events])

    converged = wait_converged(settings, ns, objects=len(events), timeout=60, procs=http_procs)
    assert converged["failed"] == 0 and converged["done"] == converged["objects"]
    with server.lock:
        seen = server.requests[first:]
    statuses = [status for status, _ in seen]
    assert statuses.count(503) == RETRY_ATTEMPTS - 1, statuses
    # The failed batch was retried as is: the same inputs again until the server recovered.
    assert [s for s, _ in seen[:RETRY_ATTEMPTS]] == [503] * (RETRY_ATTEMPTS - 1) + [200]
    assert all(inputs == seen[0][1] for _, inputs in seen[:RETRY_ATTEMPTS])
    # Every row holds the server's vector for its own index text (order kept through HTTP).
    texts = _index_texts(settings, ns)
    stored = {str(oid): np.asarray(vec, dtype=np.float32) for oid, vec in rows(
        settings, "SELECT id, embedding::real[] FROM object_embeddings WHERE namespace_id = %s",
        ns)}
    ids = sorted(texts)
    expected = StaticEmbedder().embed([texts[i] for i in ids])
    for oid, want in zip(ids, expected, strict=True):
        assert stored[oid].shape == (STATIC_DIM,)
        assert float(np.dot(stored[oid], want)) > 0.999, oid
    assert_graph_matches_postgres(settings, ns)
    assert dead_letters_mentioning(settings, [marker]) == []
    log.info("flaky embedder: %d requests, statuses %s", len(seen), statuses)


def test_embedder_that_always_fails_marks_rows_failed_and_dead_letters_them(
        http_procs: ProcSet, server: EmbeddingServer) -> None:
    settings = http_procs.settings
    ns = uuid.uuid4()
    marker = f"broken{uuid.uuid4().hex[:10]}"
    with server.lock:
        server.fail_marker = marker
    events = [put(ns, kind="company", title=f"{marker} {i}",
                  **({"content": long_content(f"{marker}c{i}")} if i == 0 else {}))
              for i in range(5)]
    publish_fast(settings, [(e, e["data"]["id"]) for e in events])

    wait_for(lambda: (c := ns_counts(settings, ns))["objects"] > len(events)
             and c["failed"] == c["objects"], timeout=60, what="every row marked failed")
    failed = {str(oid): (error, attempts) for oid, error, attempts in rows(
        settings, "SELECT id, embed_error, embed_attempts FROM object_embeddings"
        " WHERE namespace_id = %s AND embed_status = 'failed' AND embedding IS NULL", ns)}
    counts = ns_counts(settings, ns)
    assert len(failed) == counts["objects"]
    for oid, (error, attempts) in failed.items():
        assert f"after {RETRY_ATTEMPTS} attempts" in error and "503" in error, (oid, error)
        assert attempts == 1, oid
    # Retries respect EMBED_RETRY_ATTEMPTS: each row's text hit the server exactly
    # that many times (it is claimed once; a failed row is not claimed again).
    hits = Counter(text for _, inputs in server.requests_naming(marker) for text in inputs)
    assert set(hits.values()) == {RETRY_ATTEMPTS}, hits
    assert set(hits) == set(_index_texts(settings, ns).values())
    assert all(status == 503 for status, _ in server.requests_naming(marker))

    # One dead letter per row, with the stable code, naming the object.
    def all_letters() -> list[tuple[bytes, dict[str, str]]] | None:
        found = dead_letters_mentioning(settings, list(failed))
        return found if len(found) >= len(failed) else None

    letters = wait_for(all_letters, timeout=30, what="embedding dead letters")
    named = Counter(json.loads(value)["id"] for value, _ in letters)
    assert named == Counter(dict.fromkeys(failed, 1)), named
    for value, headers in letters:
        assert headers["brainstream.error.code"] == "embedding_failed", headers
        assert str(ns) == json.loads(value)["namespace"]
        assert f"after {RETRY_ATTEMPTS} attempts" in headers["brainstream.error.message"]
    # The graph still gets the nodes (text search and links work), without vectors.
    wait_for(lambda: ns_counts(settings, ns)["backlog"] == 0
             and len(graph_node_summary(settings, ns)) == len(events), timeout=30,
             what="vector-less nodes of the failed objects")
    assert {v[:2] for v in graph_node_summary(settings, ns).values()} == {(1, False)}
    assert_graph_matches_postgres(settings, ns, expect_vectors=False)
