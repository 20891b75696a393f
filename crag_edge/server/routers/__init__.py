"""The service's routes, one `APIRouter` per area; `server.app.create_app` includes each.

A new area is a module here with a `router` (protected routes declare the scope they need,
`dependencies=requires("query")`, and reach the engine through `StateDep`, see `server.deps`)
and one `include_router` line.
"""
