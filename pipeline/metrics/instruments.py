"""The counters and histograms of the pipeline processes, updated where the work happens.

Import this only after `pipeline.metrics.multiproc` chose the multiprocess mode (a Celery worker):
prometheus_client picks its value classes when first imported.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

EVENTS = Counter("brainstream_events_total", "Events consumed, by outcome",
                 ["outcome"])  # applied | duplicate | stale | deferred | dead_lettered | marker
DEAD_LETTERS = Counter("brainstream_dead_letters_total", "Dead-lettered events, by error code",
                       ["code"])
BATCH_SECONDS = Histogram("brainstream_consumer_batch_seconds",
                          "Time to make one consumer batch durable",
                          buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30))
EMBED_SECONDS = Histogram("brainstream_embed_batch_seconds", "Embedder call latency per batch",
                          buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60))
EMBED_BATCH = Histogram("brainstream_embed_batch_size", "Texts per embedder call",
                        buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
EMBED_FAILURES = Counter("brainstream_embed_failures_total",
                         "Rows marked failed after every retry")
EMBED_REUSED = Counter("brainstream_embed_reused_total",
                       "Rows given a stored vector of the same text and model, not embedded")
GRAPH_SECONDS = Histogram("brainstream_graph_write_seconds", "Graph sync latency per relay round",
                          buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10))
GRAPH_FAILURES = Counter("brainstream_graph_write_failures_total",
                         "Relay rounds that failed because the graph was unavailable")
EXTRACT_SECONDS = Histogram("brainstream_extract_batch_seconds",
                            "Extractor call latency per batch",
                            buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60))
EXTRACT_BATCH = Histogram("brainstream_extract_batch_size", "Rows per extractor call",
                          buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
EXTRACT_FAILURES = Counter("brainstream_extract_failures_total",
                           "Rows whose extraction was marked failed (dead-lettered)")
EXTRACT_MENTIONS = Counter("brainstream_extract_mentions_total",
                           "Mentions written by the extraction stage")
