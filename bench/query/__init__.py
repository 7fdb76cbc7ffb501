"""The read path: latency and throughput at 10k to 1M parts against bare-query floors
(`python -m bench.query`), and POST /v1/paths on a synthetic entity graph (`paths`)."""
