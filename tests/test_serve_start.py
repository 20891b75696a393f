"""`serve` says what it is loading while it loads: one log line per model on stderr, before
the engine is ready, from a real `crag-edge serve` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from crag_edge.config import Settings
from crag_edge.engine import Engine
from tests.servers import free_port

ROOT = Path(__file__).parent.parent
SAMPLE = ROOT / "sample_corpus"

pytestmark = pytest.mark.models


def test_serve_names_each_model_as_it_loads(tmp_path: Path, embedder: Any) -> None:
    db = tmp_path / "corpus.db"
    with Engine.open(db, Settings.load(), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
    env = os.environ | {"CRAG_EDGE_GRADING_TIERS": '["signals", "cross_encoder"]'}
    env.pop("CRAG_EDGE_API_TOKEN", None)
    command = [sys.executable, "-m", "crag_edge.cli", "serve", "--db", str(db)]
    process = subprocess.Popen(
        [*command, "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 120
        while "engine ready" not in said:
            assert time.monotonic() < deadline and process.poll() is None, said
            said.append(json.loads(process.stderr.readline())["msg"])
    finally:
        process.terminate()
        process.wait(timeout=60)
    loading = [message for message in said if message.startswith("loading the ")]
    assert loading == [
        f"loading the embedder {Settings().models.embedder}",
        "loading the evaluator crag-edge-evaluator-scifact",
    ], said
    assert said.index(loading[-1]) < said.index("engine ready")
