"""The candidate channels of hybrid search, one module each, all speaking `pipeline.ports.Channel`.

The engine fuses whatever channels it is given, by name: a new channel is a module here and one
line in `standard_channels` (or in the wiring that builds the engine).
"""

from __future__ import annotations

from pipeline.ports import Channel, PartSearcher, QueryEmbedder
from pipeline.retrieval.channels.dense import DenseChannel
from pipeline.retrieval.channels.lexical import LexicalChannel
from pipeline.retrieval.channels.trigram import TrigramChannel


def standard_channels(searcher: PartSearcher, embed_query: QueryEmbedder | None, *,
                      embed_timeout: float) -> list[Channel]:
    """Lexical (BM25), trigram and dense over one searcher: what `search` fuses by default."""
    return [LexicalChannel(searcher), TrigramChannel(searcher),
            DenseChannel(searcher, embed_query, embed_timeout=embed_timeout)]
