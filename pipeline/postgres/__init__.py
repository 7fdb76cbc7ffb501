"""What every wing's SQL shares: connection pools, statement plans, the error translator and
the write path's clock. A wing's own statements live in that wing (docs/architecture.md)."""
