"""The OpenAPI schema as this server answers: its own limits, and its own error body.

The request models are shared by every server, but the limits are each server's (the
`max_question_chars` and `max_ingest_paths` of its configuration), so they are written into
the schema here; a request the schema allows is then never refused for its shape or size.
FastAPI documents a schema mismatch (422) with its default body; this service answers with
`ErrorBody`, so the schema says so.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from crag_edge.server.config import ServerConfig

_FASTAPI_422 = "#/components/schemas/HTTPValidationError"
_ERROR_BODY = "#/components/schemas/ErrorBody"


def install_openapi(app: FastAPI, config: ServerConfig) -> None:
    """Serve the schema of `app` with the limits of `config` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                routes=app.routes,
            )
            _state_limits(schema["components"]["schemas"], config)
            _error_body_for_422(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _state_limits(models: dict[str, Any], config: ServerConfig) -> None:
    models["QueryRequest"]["properties"]["question"]["maxLength"] = (
        config.settings.server_max_question_chars
    )
    models["IngestRequest"]["properties"]["paths"]["maxItems"] = (
        config.settings.server_max_ingest_paths
    )


def _error_body_for_422(schema: dict[str, Any]) -> None:
    """Every 422 response refers to `ErrorBody`; FastAPI's own validation models go."""
    for operations in schema["paths"].values():
        for operation in operations.values():
            content = operation.get("responses", {}).get("422", {}).get("content", {})
            for media in content.values():
                if media.get("schema", {}).get("$ref") == _FASTAPI_422:
                    media["schema"] = {"$ref": _ERROR_BODY}
    models = schema["components"]["schemas"]
    models.pop("HTTPValidationError", None)
    models.pop("ValidationError", None)
