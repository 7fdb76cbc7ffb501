-- Conversation memory, operations: `status` and the metrics exporter count each extractor's
-- failed messages at every scrape; a partial index keeps that count off the whole table.
CREATE INDEX message_extraction_failed ON message_extraction (extractor) WHERE status = 'failed';
