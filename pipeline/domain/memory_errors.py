"""Conversation memory's errors (the rest are in pipeline/domain/errors.py, whose base classes
these extend): the codes of memory events that cannot apply, of the memory API, and of the
message extractors and the summariser."""

from __future__ import annotations

from pipeline.domain.errors import BrainstreamError, InvalidInput, NotFound


class SessionNotFound(InvalidInput):
    """A memory event names a session that does not exist in the namespace."""

    code = "session_not_found"


class SessionDeleted(InvalidInput):
    """Messages, metadata or a summary for a soft-deleted session (a session.put revives it)."""

    code = "session_deleted"


class MessageNotFound(InvalidInput):
    """A message uuid that no visible message of the session has (metadata, summary point)."""

    code = "message_not_found"


class UuidInOtherSession(InvalidInput):
    """A message or summary uuid already used by another session of the namespace."""

    code = "uuid_in_other_session"


class PrivilegedKeyRequired(InvalidInput):
    """The top-level `system` metadata key of a message, written by a record not signed with a
    publisher key flagged `privileged`."""

    code = "privileged_key_required"


class MemorySessionNotFound(NotFound):
    """The read API: no live session of that id in the namespace."""

    code = "session_not_found"


class ExtractorFailed(BrainstreamError):
    """A message extractor (token count, embedding, entities) kept failing after every retry, or
    refused the message: its state is marked failed and the reason dead-lettered."""

    code = "extractor_failed"


class SummaryFailed(BrainstreamError):
    """The summariser kept failing (or refused the turns) after every retry: the session's
    summary point stays where it was and the reason is dead-lettered; the next message tries
    again."""

    code = "summary_failed"


class SummariserError(BrainstreamError):
    """The summariser failed permanently (a 4xx, an answer off the chat-completions contract)."""

    code = "summariser_error"
