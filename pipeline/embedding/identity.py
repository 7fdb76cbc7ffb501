"""The identity of an embedding model: everything that changes the vectors it gives a text.

A stored vector is reused for the same text only under the same identity (`model_key`), so a
different model, a new version of the same one, another dimension or another cut of the text
never gets a stale vector. Each adapter describes itself (`identity`: name, version or weights,
dimension, normalisation); the stage adds what it controls (the cut of the text it sends).
"""

from __future__ import annotations

import hashlib
from importlib import metadata

from pipeline.domain.vectors import VectorSpace
from pipeline.embedding.settings import EmbeddingSettings
from pipeline.ports import Embedder

# The longest text one embedding call is given: past every shipped model's input window, so the
# cut never changes a vector of theirs (the memory extractors cut at the same length). Part of
# the identity: another cut could change the vector of a long text.
EMBED_TEXT_CAP_CHARS = 8000

# The digest keeps the key short (it is stored on every vector's row) and still unique: 64 bits
# of SHA-256 over the description, so two identities collide with odds of one in 2^32 only
# after 2^32 models.
_DIGEST_HEX = 16


def package_version(distribution: str) -> str:
    """The installed version of `distribution`, or `unknown` (then every process of this
    install still agrees, and a reinstall that can tell changes the key)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def model_key(embedder: Embedder) -> str:
    """`<name>:<digest>`: the embedder's name for people, and a digest of its identity and the
    stage's text cut for equality."""
    described = getattr(embedder, "identity", None) or f"{embedder.name} dim={embedder.dim}"
    full = f"{described} text_cap={EMBED_TEXT_CAP_CHARS}"
    return f"{embedder.name}:{hashlib.sha256(full.encode()).hexdigest()[:_DIGEST_HEX]}"


# The model names a shipped embedder answers to besides its setting (what a caller that computed
# vectors with the same model elsewhere would call it).
_MODEL_NAMES: dict[str, tuple[str, ...]] = {
    "minilm": ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"),
    "static": ("wordllama",),
}


def vector_space(settings: EmbeddingSettings) -> VectorSpace:
    """The vector space of the generation `settings` address: the names a caller's vector may
    give as its model (`http`: the model the server is asked for) and the dimension."""
    if settings.embedder == "http":
        names: tuple[str, ...] = (settings.embedder_model or "http",)
    else:
        names = (settings.embedder, *_MODEL_NAMES.get(settings.embedder, ()))
    return VectorSpace(names=names, dim=settings.vector_dim)
