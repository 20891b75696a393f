"""The sample corpus served live on 127.0.0.1 with the shipped evaluator and SmolLM2, for the
tests of the service's outside-facing protocols (MCP, the OpenAI chat API)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.server import ServerConfig

if TYPE_CHECKING:
    from tests.test_server import Running

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
# The shipped evaluator grades; the LLM answers briefly; follow-ups use the keyword rewrite
# (SmolLM2 cannot rewrite them: tests/test_followup.py).
SETTINGS: dict[str, Any] = {
    "grading_tiers": ["signals", "cross_encoder"],
    "rewrite_with_llm": False,
    "llm_max_tokens": 24,
}
WAL = "How does SQLite write-ahead logging work?"
FOLLOW_UP = "Does it work on network file systems?"
NONSENSE = "qwxz vbnm plokij"
TOKEN = "s3cret-token"


def sample_corpus(folder: Path, embedder: Any) -> Path:
    db = folder / "corpus.db"
    with Engine.open(db, Settings.load(**SETTINGS), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
    return db


@contextmanager
def live_service(db: Path, embedder: Any, token: str | None = TOKEN) -> Iterator[Running]:
    """The service for `db` behind `token`, ready to answer."""
    from tests.test_server import factory_for, running  # needs the server extra; sample_corpus not

    config = ServerConfig(db=db, settings=ServerSettings(api_token=token))
    with running(config, factory_for(db, embedder, **SETTINGS)) as handle:
        yield handle
