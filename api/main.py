"""The ASGI application uvicorn serves (`brainstream api`)."""

from api.app import create_app
from pipeline.supervisor.lifeline import follow_api_parent

follow_api_parent()  # a spawned worker (API_WORKERS > 1) dies with its uvicorn parent
app = create_app()
