"""Two hosts against one: documents/s until settled and searches/s, with one `brainstream up`
host and with two over the same services, in one run.

1. One embedded stack of its own (`.brainstream-bench/hosts`, ports = defaults + 2150 +
   BRAINSTREAM_TEST_PORT_OFFSET), started once; the hosts use it as external services
   (bench/harness/hosts.py: a host is one `brainstream up` with its own DATA_DIR and ports: a
   consumer, the embedding, extraction and relay workers, an API with API_WORKERS=1).
2. Per phase (one host, then two hosts) a fresh database, graph, Celery broker database and
   topics (the input topic with `--partitions` partitions, so two consumers split it), the
   static embedder, and fresh host data directories: each phase starts from empty stores.
3. Ingest: `--docs` SciFact abstracts published through the hosts' APIs (`POST /v1/events`,
   batches of 100; with two hosts half through each), timed from the first publish until
   settled: every document embedded and projected into the graph, nothing left to extract,
   propose or relay, and every host's lexical index holding every document (`settled`).
   Documents/s = docs / that time; the CPU every process group spent meanwhile, per host
   process and per shared service, says what bounds the ratio.
4. Searches (after the two-host ingest, on its data): `--clients` closed-loop clients for
   `--seconds` each, all through one host's API, then split between the two APIs; the same
   hybrid queries (words of the documents' titles).
5. Report: documents/s with one host and with two and their ratio, searches/s through one API
   and through two and their ratio, the cores each component kept busy, PASS/FAIL.

Targets. The two hosts share this machine's cores with each other and with every service, so
two hosts cannot be twice as fast as one here: on a 2-core machine one host's pipeline already
keeps the cores busy. The honest target is that scaling out costs nothing: two hosts >= 0.9x one
host in documents/s (the 10% is the second set of idle processes, a second consumer's
rebalance and the load other work puts on the machine between the phases), and the same for
searches/s through two APIs. Past one machine the figures add up host by host; that is what
the partitions, the shared queues and the per-host lexical index are for.

    python -m bench.hosts [--docs 2000] [--partitions 4] [--clients 4] [--seconds 10]
                          [--quick] [--out FILE]
"""

