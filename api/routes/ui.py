"""The web explorer: its static files at `/ui` (api/ui/, no build step), the graph library it
draws with (cytoscape, installed by `npm ci` from package.json), and `GET /v1/me`, which tells
the explorer the namespaces of the key a user entered (its namespace chooser) and whether the
key may read the operator page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, FastAPI, Header, Request
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel

from api.dependencies import bearer_key
from api.errors import ERRORS
from pipeline.domain.errors import NotFound, Unauthorized
from pipeline.settings import Settings

UI_DIR = Path(__file__).resolve().parents[1] / "ui"
CYTOSCAPE = (Path(__file__).resolve().parents[2] / "node_modules" / "cytoscape" / "dist"
             / "cytoscape.min.js")

router = APIRouter(tags=["ui"], responses=ERRORS)


class MeOut(BaseModel):
    """What the caller's key may read: its namespaces (name one with X-Namespace when there
    are several) and whether it may read the operator's status."""

    namespaces: list[str]
    admin: bool


@router.get("/v1/me", response_model=MeOut)
async def me(request: Request,
             authorization: Annotated[str | None, Header()] = None) -> MeOut:
    """The namespaces of the caller's key, and whether it is an admin key."""
    settings: Settings = request.app.state.settings
    key = bearer_key(authorization)
    namespaces = settings.api_keys.get(key, [])
    admin = key in settings.api_admin_keys
    if not namespaces and not admin:
        raise Unauthorized("unknown API key", field="Authorization")
    return MeOut(namespaces=list(namespaces), admin=admin)


@router.get("/ui/vendor/cytoscape.min.js", include_in_schema=False)
async def cytoscape() -> FileResponse:
    """The graph library, from node_modules (`make install` runs `npm ci`)."""
    if not CYTOSCAPE.is_file():
        raise NotFound("the graph library is not installed: run `make install` (npm ci)")
    return FileResponse(CYTOSCAPE, media_type="text/javascript")


def install(app: FastAPI) -> None:
    """Serve the explorer at /ui (after the routers: /ui/vendor/... is a route of its own)."""
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
