"""The read side's SQL (and Redis): the search channels, object reads, filters, expand recipes,
the mixed graph of paths, entity reads, PPR's subgraph and snapshots, and result sets."""
