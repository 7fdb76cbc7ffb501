"""The web explorer: its static files at `/ui` (api/ui/, no build step), the graph library it
draws with (cytoscape) and the OpenAPI page's Swagger UI (swagger-ui-dist), both installed by
`npm ci` from package.json and served from this origin (no CDN: the explorer keeps a key in
this origin's storage), and `GET /v1/me`, which tells the explorer the name of the key a user
entered, its namespaces with their scopes (the namespace chooser) and whether the key may read
the operator page."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from api.access import Caller
from api.errors import ERRORS
from pipeline.access import Scope
from pipeline.domain.errors import NotFound

UI_DIR = Path(__file__).resolve().parents[1] / "ui"
_NODE_MODULES = Path(__file__).resolve().parents[2] / "node_modules"
CYTOSCAPE = _NODE_MODULES / "cytoscape" / "dist" / "cytoscape.min.js"
_SWAGGER = _NODE_MODULES / "swagger-ui-dist"
# What /ui/vendor/<name> serves: the files of npm packages the pages load, with their types
# (compose/Dockerfile copies exactly these into the image).
VENDOR: dict[str, tuple[Path, str]] = {
    "cytoscape.min.js": (CYTOSCAPE, "text/javascript"),
    "swagger-ui-bundle.js": (_SWAGGER / "swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": (_SWAGGER / "swagger-ui.css", "text/css"),
    "favicon-32x32.png": (_SWAGGER / "favicon-32x32.png", "image/png"),
}

# The OpenAPI page: FastAPI's Swagger UI page with its files from /ui/vendor/, the same bytes on
# every answer (api/security_headers.py allows its one inline script by this page's hash).
DOCS_HTML = bytes(get_swagger_ui_html(
    openapi_url="/openapi.json", title="brainstream read API - Swagger UI",
    swagger_js_url="/ui/vendor/swagger-ui-bundle.js", swagger_css_url="/ui/vendor/swagger-ui.css",
    swagger_favicon_url="/ui/vendor/favicon-32x32.png",
    # no badge from swagger.io's validator: the page loads nothing from elsewhere
    swagger_ui_parameters={"validatorUrl": None}).body).decode()

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


@router.get("/docs", include_in_schema=False)
async def docs() -> HTMLResponse:
    """The OpenAPI page (Swagger UI, served from this origin)."""
    return HTMLResponse(DOCS_HTML)


@router.get("/ui/vendor/{name}", include_in_schema=False)
async def vendor(name: str) -> FileResponse:
    """A file of the pages' libraries, from node_modules (`make install` runs `npm ci`)."""
    if name not in VENDOR:
        raise NotFound("no such file", field="name")
    path, media_type = VENDOR[name]
    if not path.is_file():
        raise NotFound(f"{name} is not installed: run `make install` (npm ci)")
    return FileResponse(path, media_type=media_type)


def install(app: FastAPI) -> None:
    """Serve the explorer at /ui (after the routers: /ui/vendor/... is a route of its own)."""
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
