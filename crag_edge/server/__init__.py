"""crag-edge as an HTTP service for on-prem, air-gapped sites (`crag-edge serve`).

`create_app(config, engine_factory)` builds the FastAPI app; `crag_edge.server.cli.serve`
runs it under uvicorn. Needs the `server` extra (fastapi, uvicorn).
"""

from crag_edge.server.config import ServerConfig, ServerConfigError, is_loopback

__all__ = ["ServerConfig", "ServerConfigError", "create_app", "is_loopback"]


def __getattr__(name: str) -> object:
    # The app pulls in FastAPI; importing the config alone (e.g. to validate) must not.
    if name == "create_app":
        from crag_edge.server.app import create_app

        return create_app
    raise AttributeError(name)
