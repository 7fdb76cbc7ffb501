"""How many torch threads a worker's embedder gets: the cores shared by its pool processes, and
one for a worker that embeds entity names only (`embed_with_one_thread`, set by
`brainstream worker` when it does not serve the embedding queue)."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.settings import Settings
from workers import runtime


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    threads: list[int | None] = []

    def build(settings: Settings, *, num_threads: int | None = None) -> Any:
        threads.append(num_threads)
        return object()

    monkeypatch.setattr(runtime, "build_embedder", build)
    monkeypatch.setattr(runtime, "_embedders", {})
    monkeypatch.setattr(runtime, "_embed_threads", None)
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 8)
    return threads


def test_pool_processes_share_the_cores(built: list[int | None]) -> None:
    runtime._embedder(Settings.model_validate({"embedder": "minilm", "worker_concurrency": 2}))
    assert built == [4]


def test_a_names_only_worker_embeds_on_one_thread(built: list[int | None]) -> None:
    runtime.embed_with_one_thread()
    runtime._embedder(Settings.model_validate({"embedder": "minilm", "worker_concurrency": 1}))
    assert built == [1]
