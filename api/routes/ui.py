"""The web explorer: its static files at `/ui` (api/ui/, no build step), the graph library it
draws with (cytoscape, installed by `npm ci` from package.json), and `GET /v1/me`, which tells
the explorer the name of the key a user entered, its namespaces with their scopes (the
namespace chooser) and whether the key may read the operator page."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from api.access import Caller
from api.errors import ERRORS
from pipeline.access import Scope
from pipeline.domain.errors import NotFound

UI_DIR = Path(__file__).resolve().parents[1] / "ui"
CYTOSCAPE = (Path(__file__).resolve().parents[2] / "node_modules" / "cytoscape" / "dist"
             / "cytoscape.min.js")

router = APIRouter(tags=["ui"], responses=ERRORS)


class MeOut(BaseModel):
    """Who the caller's key is and what it may do."""

    name: str = Field(description="the key's name (the `source` of its events is "
                                   "`api:<name>`, the `decided_by` of its curation)")
    namespaces: list[str] = Field(description="the namespaces it is bound to (name one with "
                                              "X-Namespace when there are several)")
    scopes: dict[str, list[Scope]] = Field(
        description="per namespace, the scopes it holds, implied ones included "
                    "(read < write < admin)")
    operator: bool = Field(description="whether it may read the operator's status")


@router.get("/v1/me", response_model=MeOut)
async def me(key: Caller) -> MeOut:
    """The caller's key: its name, namespaces with their scopes, and whether it is an
    operator key."""
    return MeOut(name=key.name, namespaces=[str(ns) for ns in key.namespaces],
                 scopes={str(ns): list(key.granted(ns)) for ns in key.namespaces},
                 operator=key.operator)


@router.get("/ui/vendor/cytoscape.min.js", include_in_schema=False)
async def cytoscape() -> FileResponse:
    """The graph library, from node_modules (`make install` runs `npm ci`)."""
    if not CYTOSCAPE.is_file():
        raise NotFound("the graph library is not installed: run `make install` (npm ci)")
    return FileResponse(CYTOSCAPE, media_type="text/javascript")


def install(app: FastAPI) -> None:
    """Serve the explorer at /ui (after the routers: /ui/vendor/... is a route of its own)."""
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
