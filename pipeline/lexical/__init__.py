"""The lexical index on Tantivy: documents, the queue filled at commit, the one writer, the
searchers, the search vocabulary and the SQL BM25 postings switch."""
