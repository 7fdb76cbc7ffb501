"""Caller-supplied vectors: which vector space an index generation searches, and whether a
vector a caller sends (a put's, a search's query vector) belongs to it.

A generation's vectors all come from one embedder (`EMBEDDER`, a replay's `--embedder`); a
caller's vector is comparable with them only when the caller computed it with the same model, so
it must name that model and have its dimension. The names a generation answers to are its
embedder's setting (`minilm`, `static`), the model's own name where it has one
(`sentence-transformers/all-MiniLM-L6-v2`), and for `http` the model the server is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.domain.errors import VectorMismatch

# The model key a caller-supplied vector is stored under (`object_embeddings.model`): never a
# model key of an embedder (`<name>:<digest>`, pipeline/embedding/identity.py), so the vector
# reuse never hands a caller's vector to another row, and the stage never claims it.
CALLER_MODEL_PREFIX = "caller:"

# pgvector stores single-precision floats: a larger value would be infinite there
_FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class VectorSpace:
    """The model (by the names it answers to; the first is the canonical one) and the
    dimension of one index generation's vectors."""

    names: tuple[str, ...]
    dim: int

    @property
    def model(self) -> str:
        return self.names[0]

    def check(self, model: str, values: Sequence[float], *, field: str) -> list[float]:
        """`values` as floats when `model` is one of this space's names and the vector has its
        dimension, finite and not all zero; VectorMismatch naming `field.model` or
        `field.values` otherwise."""
        if model not in self.names:
            raise VectorMismatch(
                f"vector model {model!r} is not this index generation's model {self.model!r}"
                f" ({self.dim} dimensions)", field=f"{field}.model")
        if len(values) != self.dim:
            raise VectorMismatch(
                f"vector has {len(values)} values; the generation's model {self.model!r} has"
                f" {self.dim} dimensions", field=f"{field}.values")
        floats = [float(v) for v in values]
        if not all(math.isfinite(v) and abs(v) <= _FLOAT32_MAX for v in floats):
            raise VectorMismatch("vector values must be finite single-precision numbers",
                                 field=f"{field}.values")
        if not any(floats):
            raise VectorMismatch("a vector of zeros has no direction", field=f"{field}.values")
        return floats


def caller_model(space: VectorSpace) -> str:
    """The model key a caller's vector of `space` is stored under."""
    return CALLER_MODEL_PREFIX + space.model
