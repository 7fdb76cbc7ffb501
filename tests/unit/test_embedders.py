"""Embedders: the port's contract on the static and MiniLM adapters, and the settings factory."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pipeline.domain.errors import (
    BrainstreamError,
    ConfigError,
    EmbedderError,
    EmbedderUnavailable,
    Unavailable,
)
from pipeline.embedding.embedders import (
    Embedder,
    HttpEmbedder,
    MiniLMEmbedder,
    StaticEmbedder,
    build_embedder,
    normalize_rows,
)
from pipeline.embedding.embedders.base import embed_distinct
from tests.stackutil import make_settings


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def assert_contract(vectors: np.ndarray, count: int, dim: int) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape == (count, dim)
    assert np.isfinite(vectors).all()
    norms = np.linalg.norm(vectors, axis=1)
    assert np.all((np.abs(norms - 1.0) < 1e-5) | (norms == 0.0)), norms


# -- normalize_rows ----------------------------------------------------------------------------


def test_normalize_rows_scales_to_unit_and_keeps_zero_rows() -> None:
    out = normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0], [-2.0, 0.0]], dtype=np.float64))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [-1.0, 0.0]], atol=1e-7)


# -- static ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder()


def test_static_shape_dtype_and_norms(static: StaticEmbedder) -> None:
    texts = ["The pilot landed the plane.", "Quarterly revenue grew 4%.", "naïve café 日本語"]
    vectors = static.embed(texts)
    assert static.name == "static" and static.dim == 256
    assert_contract(vectors, 3, 256)
    assert (np.linalg.norm(vectors, axis=1) > 0.99).all()


def test_static_empty_input_and_empty_text(static: StaticEmbedder) -> None:
    assert static.embed([]).shape == (0, 256)
    assert static.embed(()).dtype == np.float32
    vectors = static.embed(["", "hello"])
    assert_contract(vectors, 2, 256)
    assert not vectors[0].any()  # no tokens -> a zero row, not NaN
    assert abs(float(np.linalg.norm(vectors[1])) - 1.0) < 1e-5


def test_static_is_deterministic_and_independent_of_batching(static: StaticEmbedder) -> None:
    texts = ["alpha beta", "a much longer passage " * 40, "gamma"]
    together = static.embed(texts)
    alone = np.vstack([static.embed([t]) for t in texts])
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(together, StaticEmbedder(batch_size=1).embed(texts))


def test_static_similar_texts_are_closer(static: StaticEmbedder) -> None:
    cat, kitten, stocks = static.embed(
        ["a cat sits on the mat", "a kitten sleeps on the rug", "stock market crash hits banks"]
    )
    assert cosine(cat, kitten) > cosine(cat, stocks) + 0.05


def test_static_refuses_a_bare_string(static: StaticEmbedder) -> None:
    with pytest.raises(TypeError):
        static.embed("not a list")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=20))
def test_static_contract_holds_for_any_texts(texts: list[str]) -> None:
    assert_contract(StaticEmbedder().embed(texts), len(texts), 256)


# -- MiniLM ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMEmbedder]:
    """MiniLM loaded with HF_HUB_OFFLINE=1 and outbound connections refused: proves no download."""
    real_connect = socket.socket.connect

    def loopback_only(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            raise OSError(f"network access attempted during model load: {address!r}")
        real_connect(sock, address)

    embedder = MiniLMEmbedder()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(socket.socket, "connect", loopback_only)
        embedder.embed(["warm up: loads the model once for the process"])
    yield embedder


def test_minilm_shape_dtype_and_norms(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(["The pilot landed the plane.", "", "Quarterly revenue grew 4%."])
    assert minilm.name == "minilm" and minilm.dim == 384
    assert_contract(vectors, 3, 384)
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_semantic_sanity(minilm: MiniLMEmbedder) -> None:
    cat, kitten, stocks = minilm.embed(
        ["a cat sits on the mat", "a kitten on a rug", "stock market crash"]
    )
    assert cosine(cat, kitten) > 0.4
    assert cosine(cat, kitten) > cosine(cat, stocks) + 0.2


def test_minilm_batches_give_the_same_vectors(minilm: MiniLMEmbedder) -> None:
    # lengths out of order: the length buckets reorder the texts, the rows come back in order
    texts = [f"passage number {i} about topic {i % 7}" + " and more" * (i * 7 % 10)
             for i in range(10)]
    one_batch = MiniLMEmbedder(batch_size=64).embed(texts)
    np.testing.assert_allclose(minilm.embed(texts), one_batch, atol=1e-5)
    np.testing.assert_allclose(MiniLMEmbedder(batch_size=3).embed(texts), one_batch, atol=1e-5)
    alone = np.vstack([minilm.embed([text]) for text in texts])
    np.testing.assert_allclose(alone, one_batch, atol=1e-5)


def test_minilm_num_threads_is_applied(minilm: MiniLMEmbedder) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        MiniLMEmbedder(num_threads=1).embed(["one thread"])
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_minilm_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(ValueError):
        MiniLMEmbedder(num_threads=0)


# -- factory and errors ------------------------------------------------------------------------


def test_build_embedder_static_and_minilm() -> None:
    static = build_embedder(make_settings(embedder="static"))
    assert isinstance(static, StaticEmbedder) and static.dim == 256
    minilm = build_embedder(make_settings(embedder="minilm"), num_threads=1)
    assert isinstance(minilm, MiniLMEmbedder) and minilm.dim == 384 and minilm.num_threads == 1
    assert isinstance(static, Embedder) and isinstance(minilm, Embedder)


def test_build_embedder_http() -> None:
    embedder = build_embedder(
        make_settings(
            embedder="http",
            embedder_url="http://127.0.0.1:9/v1",
            embedder_model="bge-small",
            embedding_dim=512,
        )
    )
    assert isinstance(embedder, HttpEmbedder) and isinstance(embedder, Embedder)
    assert embedder.dim == 512
    assert embedder.model == "bge-small"
    assert embedder.endpoint == "http://127.0.0.1:9/v1/embeddings"
    embedder.close()


def test_build_embedder_http_needs_url_and_dim() -> None:
    with pytest.raises(ConfigError) as missing_url:
        build_embedder(make_settings(embedder="http", embedding_dim=384))
    assert missing_url.value.field == "embedder_url"
    with pytest.raises(ConfigError) as missing_dim:
        build_embedder(make_settings(embedder="http", embedder_url="http://127.0.0.1:9"))
    assert missing_dim.value.field == "embedding_dim"
    with pytest.raises(ConfigError) as bad_url:
        build_embedder(make_settings(embedder="http", embedder_url="ftp://x", embedding_dim=8))
    assert bad_url.value.field == "embedder_url"


def test_build_embedder_refuses_a_dim_the_model_cannot_produce() -> None:
    with pytest.raises(ConfigError) as exc:
        build_embedder(make_settings(embedder="static", embedding_dim=384))
    assert exc.value.field == "embedding_dim"


def test_embedder_error_classes() -> None:
    assert issubclass(EmbedderUnavailable, Unavailable)
    assert issubclass(EmbedderError, BrainstreamError)
    assert not issubclass(EmbedderError, Unavailable)
    assert EmbedderUnavailable("x").code == "embedder_unavailable"
    assert EmbedderError("x").code == "embedder_error"


class _Counting:
    """An embedder that records what reached it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.seen: list[str] = []

    def embed(self, texts: Any) -> np.ndarray:
        self.seen += list(texts)
        return self.inner.embed(texts)


def test_embed_distinct_embeds_each_text_once_and_answers_every_row(
        static: StaticEmbedder) -> None:
    counting = _Counting(static)
    texts = ["alpha beta", "gamma", "alpha beta", "delta", "gamma", "alpha beta"]
    vectors = embed_distinct(counting, texts)
    assert counting.seen == ["alpha beta", "gamma", "delta"]
    assert np.array_equal(vectors, static.embed(texts))
    counting.seen.clear()
    assert embed_distinct(counting, ["one", "two"]).shape == (2, static.dim)
    assert counting.seen == ["one", "two"]
    assert embed_distinct(counting, []).shape == (0, static.dim)
