-- Conversation memory, operations: the summary lag that `status` and the metrics exporter read
-- at every scrape (pipeline/ops/memory.py: read_memory_backlog) is the live sessions with more
-- messages past their summary point than the window. Without an index on that difference each
-- scrape read every session; with it, only the sessions past the window (the summariser's
-- debt, normally none). Every messages.add already rewrites its session row (last_seq).
CREATE INDEX sessions_unsummarised ON sessions ((last_seq - summary_seq))
    WHERE deleted_at IS NULL;
