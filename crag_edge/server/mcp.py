"""crag-edge for assistants that speak the Model Context Protocol.

Three tools over one corpus: `search` (the ranked passages; with `grade`, every hit
graded), `ask` (the CRAG verdict and the
refined, numbered evidence: the assistant writes the answer) and `answer` (crag-edge's own
cited answer). What sets them apart from a plain retriever is the verdict, so each tool's
description tells the calling model what CORRECT, AMBIGUOUS and INCORRECT mean for it.
Every tool takes the conversation's earlier turns (`history`): a follow-up question is made
standalone before retrieval and the result says so.

`crag-edge mcp` serves these tools over stdio (`serve_stdio`); the HTTP service mounts the
same server over streamable HTTP (`server.routers.mcp`). Both reach the engine through an
`EngineRunner`, which decides where the blocking work runs and who may run it: each tool names
the scope it needs (`search` and `ask` query, `answer` answer, as the HTTP routes do) and
receives the caller's document groups to search with.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from crag_edge.answer.views import MEANINGS, graded_hits, sources, verdict
from crag_edge.cancellation import Cancellation
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.models.registry import ModelNotInstalledError
from crag_edge.result import CragResult
from crag_edge.server.scopes import Scope
from crag_edge.text_boundary import QuestionError, asked_question

T = TypeVar("T")

DECISIONS = " ".join(f"{decision}: {meaning}." for decision, meaning in MEANINGS.items())
INSTRUCTIONS = (
    "crag-edge searches a local document corpus and grades the evidence before anyone answers "
    "from it. Every result carries a decision. " + DECISIONS
)
SEARCH_DESCRIPTION = (
    "Search the corpus: the best passages, ranked, each with its source, `locator` (file and "
    "page or section), a `snippet` with the question's words at the character spans `marks`, "
    "its text and retrieval scores; fast, no model judges them. For browsing what the corpus "
    "holds; to answer a question, prefer `ask`. With `grade`, the corrective loop grades "
    "every hit instead (grade 0-1, the tier that settled it, whether it was kept) and the "
    "result carries a decision. " + DECISIONS
)
GRADE_NOTE = (
    "Grade every hit with the corrective loop (slower: a model reads each one) and return "
    "the decision; needed to follow up on `history`."
)
ASK_DESCRIPTION = (
    "Ask the corpus a question and get the corrective-RAG verdict with the evidence to answer "
    "from: `decision`, `reason`, the corrections taken (query rewrites, discarded hits), and "
    "`context`, numbered passages to cite as [n], each with a `locator` (file and page or "
    "section, e.g. `report.pdf p. 12`) to name the source by. You write the answer. " + DECISIONS
)
ANSWER_DESCRIPTION = (
    "Ask the corpus a question and get crag-edge's own answer, written by its local model from "
    "the graded evidence only, citing passages as [n], with the `citations` it used and the "
    "verdict. When there is no whole answer, `refusal` says why (`kind`: nothing_found, "
    "not_stated, stopped), what to do next, and for not_stated the `passages` found, with "
    "their locators, for the user to read. " + DECISIONS
)
HISTORY_NOTE = (
    "The conversation's earlier turns, oldest first; give them when the question follows up "
    'on them ("and how do I undo it?"), and it is rewritten into a standalone question.'
)


class Turn(BaseModel):
    """One earlier turn of the conversation."""

    role: Literal["user", "assistant"]
    content: str


Question = Annotated[str, Field(description="The question, in plain words.")]
History = Annotated[list[Turn] | None, Field(description=HISTORY_NOTE)]
Grade = Annotated[bool, Field(description=GRADE_NOTE)]


class EngineRunner(Protocol):
    """Runs blocking engine work off the event loop, handing it the caller's view; raises
    `ToolError` when it may not (among others: the caller's scope is below `needs`)."""

    def __call__(
        self, work: Callable[[Engine, CorpusView], T], *, needs: Scope = "query"
    ) -> Awaitable[T]: ...


# Cancelled when the client is gone: the work done for it stops (None: a client that cannot
# go away on its own, as over stdio).
ClientGone = Callable[[], Cancellation | None]


class _Server(MCPServer):
    """The SDK's server with short argument errors: the SDK reports a validation failure as
    pydantic's whole text, with documentation links and the rejected input echoed back."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            raise ToolError(invalid_arguments(name, cause)) from cause


def invalid_arguments(tool: str, error: ValidationError) -> str:
    """`invalid arguments for search: question: Input should be a valid string`, naming each
    argument at fault and never its value."""
    problems = [
        f"{'.'.join(str(part) for part in e['loc']) or 'arguments'}: {e['msg']}"
        for e in error.errors(include_url=False, include_input=False)
    ]
    return f"invalid arguments for {tool}: " + "; ".join(problems)


def build_server(
    run: EngineRunner, *, max_question_chars: int = 4000, client_gone: ClientGone = lambda: None
) -> MCPServer:
    """The MCP server with the three tools, each running its engine work through `run`.
    Questions are bounded (the service passes its own limit; over stdio the default only
    stops an accidental paste of a whole document)."""
    server = _Server("crag-edge", instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def checked(question: str) -> str:
        if len(question) > max_question_chars:
            raise ToolError(f"the question is longer than {max_question_chars} characters")
        try:
            return asked_question(question)
        except QuestionError as exc:
            raise ToolError(str(exc)) from None

    async def crag(question: str, history: list[Turn] | None) -> CragResult:
        asked, turns, gone = checked(question), _turns(history), client_gone()
        return await run(
            lambda engine, view: engine.query(asked, history=turns, view=view, cancel=gone)
        )

    @server.tool(description=SEARCH_DESCRIPTION, annotations=read_only)
    async def search(
        question: Question, history: History = None, grade: Grade = False
    ) -> dict[str, Any]:
        if grade:
            result = await crag(question, history)
            return verdict(result) | {"hits": graded_hits(result)}
        if history:
            raise ToolError("history needs grade: a plain search looks for the words as given")
        asked = checked(question)
        found = await run(lambda engine, view: engine.search_passages(asked, view=view))
        return {"question": asked, "passages": [passage.to_dict() for passage in found]}

    @server.tool(description=ASK_DESCRIPTION, annotations=read_only)
    async def ask(question: Question, history: History = None) -> dict[str, Any]:
        result = await crag(question, history)
        return verdict(result) | {
            "corrections": [{"type": c.type, **c.detail} for c in result.corrections],
            "context": sources(result.context, with_text=True),
        }

    @server.tool(description=ANSWER_DESCRIPTION, annotations=read_only)
    async def answer(question: Question, history: History = None) -> dict[str, Any]:
        asked, turns = checked(question), _turns(history)
        gone = client_gone()
        return await run(
            lambda engine, view: _cited_answer(engine, asked, turns, view, gone),
            needs="answer",
        )

    return server


def _turns(history: Sequence[Turn] | None) -> list[dict[str, str]]:
    return [turn.model_dump() for turn in history or ()]


def _cited_answer(
    engine: Engine,
    question: str,
    history: list[dict[str, str]],
    corpus_view: CorpusView,
    gone: Cancellation | None,
) -> dict[str, Any]:
    """The whole answer, as every face gives it (`answer.finished`: its citations, verdict,
    refusal and the support check of every sentence the model wrote; an MCP tool returns
    one message); stopped wherever it is when the client goes away (`gone`), since nobody
    reads it."""
    try:
        _, stream = engine.answer(question, history=history, view=corpus_view, cancel=gone)
        with closing(stream):
            for _piece in stream:
                pass
    except ModelNotInstalledError as exc:
        raise ToolError(str(exc)) from None
    return stream.answer.to_dict()


def serve_stdio(db: Path, settings: Settings) -> None:
    """Open the corpus (failing here, before any protocol traffic, on a bad path) and serve
    the tools over stdin/stdout until the client closes them. The client is the local owner:
    every scope, every document."""
    with Engine.open(db, settings) as engine:
        lock = anyio.Lock()  # one engine, one question at a time

        async def run(work: Callable[[Engine, CorpusView], T], *, needs: Scope = "query") -> T:
            async with lock:
                return await anyio.to_thread.run_sync(work, engine, CorpusView.everything())

        build_server(run).run("stdio")
