"""The lexical index on Tantivy: documents, the change log filled at commit, a host's replica
and its writer, the searchers, the search vocabulary and the SQL BM25 postings switch."""
