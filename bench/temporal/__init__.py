"""bench.temporal: as-of reads over a generated history of changing facts."""
