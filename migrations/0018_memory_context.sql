-- Conversation memory, search (issue 12): the words a message is found by lexically are its own
-- and those of the turn before it in its session, written by the embed extractor with the
-- message's vector (which embeds the same text): a reply ("Yes, last May!") is found by the
-- words of the question it answers. NULL until the extractor ran: search reads `lexical` then.
ALTER TABLE messages ADD COLUMN context_lexical tsvector;
