"""The static embedder: WordLlama token-embedding averages, 256 dims, no torch.

Fast and deterministic, for tests and bulk runs. The weights and tokenizer ship inside the
`wordllama` wheel, so loading never touches the network.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.domain.errors import EmbedderError
from pipeline.embedding.embedders.base import empty_vectors, normalize_rows, text_list
from pipeline.ports import Vectors

STATIC_DIM = 256

# One model per process: loading costs ~0.2 s and the model is read-only, so every instance and
# thread shares it. The lock keeps concurrent first calls from loading it twice.
_model: Any = None
_model_lock = threading.Lock()


def _load_model() -> Any:
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                try:
                    import wordllama
                    from wordllama import WordLlama

                    # cache_dir = the package itself: that is where the wheel keeps weights/ and
                    # tokenizers/; disable_download turns a missing file into an error, not a fetch.
                    _model = WordLlama.load(
                        cache_dir=Path(wordllama.__file__).parent,
                        dim=STATIC_DIM,
                        disable_download=True,
                    )
                except Exception as exc:
                    raise EmbedderError(f"cannot load the WordLlama static model: {exc}") from exc
    return _model


class StaticEmbedder:
    """WordLlama `l2_supercat` (256 dims); deterministic, independent of batch composition."""

    name = "static"

    def __init__(self, *, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.dim = STATIC_DIM
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed `texts`; a text with no known token (e.g. empty) gives a zero row."""
        items = text_list(texts)
        if not items:
            return empty_vectors(self.dim)
        model = _load_model()
        try:
            # norm=False: WordLlama's own normalization turns a zero row into NaN.
            raw = model.embed(items, norm=False, batch_size=self.batch_size)
        except Exception as exc:
            raise EmbedderError(f"static embedding failed: {exc}") from exc
        return normalize_rows(np.asarray(raw, dtype=np.float32))
