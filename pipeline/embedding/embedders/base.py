"""Helpers of the embedder adapters: texts in, L2-normalized float32 vectors out (the port,
`Embedder`, is in `pipeline.ports`).

Embedders never retry. A transient failure raises `EmbedderUnavailable` and a permanent one
`EmbedderError`; the caller decides, through the project's single tenacity policy, whether to try
again (retrying inside an adapter too would multiply the attempts and hide the delay from it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from pipeline.ports import Embedder, Vectors

__all__ = ["Embedder", "Vectors", "embed_distinct", "empty_vectors", "normalize_rows",
           "text_list"]


def text_list(texts: Sequence[str]) -> list[str]:
    """`texts` as a list, refusing a bare string (a `str` is itself a `Sequence[str]`)."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
    return out


def normalize_rows(matrix: NDArray[np.floating]) -> Vectors:
    """Rows scaled to unit L2 norm as float32; all-zero rows stay zero instead of becoming NaN."""
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: Vectors = np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
    return out


def empty_vectors(dim: int) -> Vectors:
    """The result for an empty input: shape `(0, dim)`."""
    return np.zeros((0, dim), dtype=np.float32)


def embed_distinct(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """`embedder.embed(texts)`, each distinct text embedded once.

    A document of one chunk indexes the same text twice, as itself and as its part (a
    third of SciFact's abstracts): embedders are deterministic, so the copy gets the row.
    """
    distinct = list(dict.fromkeys(texts))
    if len(distinct) == len(texts):
        return embedder.embed(texts)
    vectors = embedder.embed(distinct)
    where = {text: i for i, text in enumerate(distinct)}
    return vectors[[where[text] for text in texts]]
