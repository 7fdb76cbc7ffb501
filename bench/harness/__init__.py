"""What several benchmarks share: the run's environment and reporting (`runenv`), latency
percentiles and concurrent calls (`timing`), a stack written in-process (`inprocess`), the
pipeline as child processes with a CPU meter (`processes`), and `pg_stat_statements`
(`pgstatements`)."""
