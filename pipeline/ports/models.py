"""The model ports: the embedder and the entity extractor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from pipeline.domain.mentions import Extraction, TextField

Vectors: TypeAlias = NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension.

    `embed` returns a float32 array of shape `(len(texts), dim)` in input order; every row has unit
    L2 norm except rows of texts that carry no signal, which stay all zero. An empty input gives
    shape `(0, dim)` without any work. Transient failures raise `EmbedderUnavailable`, permanent
    ones `EmbedderError`; callers retry, embedders do not.
    """

    name: str
    dim: int
    # what changes the vectors (model, version or weights, dimension, normalisation): equal
    # identities give equal vectors, so a stored one may be reused (pipeline/embedding/identity.py)
    identity: str

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed `texts`, one normalized row per text, in order."""
        ...


@runtime_checkable
class Extractor(Protocol):
    """Finds the entities a row names (`pipeline/entities/extractors/`).

    `extract` answers one `Extraction` per input row, in input order; a row with no text gets an
    empty one. Spans index the field they were found in. Transient failures (a model endpoint
    down) raise `Unavailable`; a text the extractor refuses raises another `BrainstreamError`.
    Callers retry and isolate refused rows, extractors do not.
    """

    name: str

    def extract(self, rows: Sequence[Sequence[TextField]]) -> list[Extraction]:
        """The mentions (and triples, if the extractor reads any) of each row, in order."""
        ...
