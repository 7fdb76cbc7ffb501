"""brainstream-client: a typed client for the brainstream API, sync (`Client`) and async
(`AsyncClient`), with paging iterators, retries on 503 with back-off, typed errors
(`ApiError`) and a publisher helper (`publish` with the builders of `events`)."""

from brainstream_client.aio import AsyncClient
from brainstream_client.client import Client
from brainstream_client.errors import (
    ApiError,
    BrainstreamClientError,
    ConnectionFailed,
    Unavailable,
)
from brainstream_client.events import (
    Event,
    PublishOut,
    delete_link,
    put_link,
    put_object,
    soft_delete,
)
from brainstream_client.models.graph import FindObjectsOut, PathsOut, RecipeBody
from brainstream_client.models.memory import MemorySearchOut, MessageBody, MessageOut, SessionOut
from brainstream_client.models.read import (
    FacetBody,
    FiltersBody,
    FusionBody,
    ObjectOut,
    PageOut,
    RichObjectOut,
    SortBody,
)
from brainstream_client.retry import RetryPolicy

__all__ = [
    "ApiError", "AsyncClient", "BrainstreamClientError", "Client", "ConnectionFailed", "Event",
    "FacetBody", "FiltersBody", "FindObjectsOut", "FusionBody", "MemorySearchOut",
    "MessageBody", "MessageOut", "ObjectOut", "PageOut", "PathsOut", "PublishOut", "RecipeBody",
    "RetryPolicy", "RichObjectOut", "SessionOut", "SortBody", "Unavailable", "delete_link",
    "put_link", "put_object", "soft_delete",
]
