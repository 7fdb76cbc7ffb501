"""The ASGI application uvicorn serves (`brainstream api`)."""

from api.app import create_app

app = create_app()
