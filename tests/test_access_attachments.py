"""Attachments through owner actions: an e-mail attachment keeps its mail file's groups
wherever a plain file keeps its own (an edit, a rename, a prune, a move into another team's
watched folder), and a caller cannot take in the text of a deleted tagged attachment under
its own groups, as it cannot a plain file's.

Real mail files, the CLI and `ingest --watch` as a user runs them, and a live service with an
`hr` ingest token; the canary is looked for in everything `hr` gets back.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.ingest.pipeline import REFUSED
from crag_edge.retrieval import Retriever
from crag_edge.store import Corpus
from tests.test_access_groups import invoke
from tests.test_formats import mail
from tests.test_watch import DEADLINE_S, sources, wait_for, watching_process

CANARY = "LEDGER-CANARY-71b4"
ATTACHED = (
    f"The supplier payment code is {CANARY}. Controllers enter the supplier payment code "
    "before the quarterly close.\n"
)
QUESTION = "What is the supplier payment code?"
FINANCE, HR = frozenset({"finance"}), frozenset({"hr"})
SUBJECT, DAY = "Quarter close", 5


def finance_mail(path: Path, line: str) -> Path:
    """A mail whose body holds `line`, carrying the finance canary as `codes.txt`."""
    body = f"Dear controllers,\n\n{line}\n\nRegards, Ana"
    message = mail(SUBJECT, body, DAY, ("codes.txt", ATTACHED.encode()))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(message))
    return path.resolve()


def attachment_of(path: Path) -> str:
    return f"{path} \u203a {SUBJECT} (2026-03-{DAY:02d}) \u203a codes.txt"


def groups_in(db: Path, source: str) -> frozenset[str]:
    with Corpus.open(db, readonly=True) as corpus:
        stored = corpus.document(source)
    assert stored is not None, source
    return stored.groups


def seen_by(db: Path, embedder: Any, groups: frozenset[str]) -> list[str]:
    """The text of every hit a caller of `groups` finds for the question, in every mode."""
    with Corpus.open(db, readonly=True) as corpus:
        retriever = Retriever(corpus, embedder)
        return [
            hit.chunk.text
            for mode in ("bm25", "dense", "hybrid")
            for hit in retriever.search(QUESTION, 50, mode=mode, view=CorpusView.of(groups))
        ]


def test_an_edited_renamed_mail_keeps_its_attachments_groups_through_a_prune(
    tmp_path: Path, embedder: Any
) -> None:
    finance, db = tmp_path.resolve() / "finance", tmp_path / "c.db"
    first = finance_mail(finance / "close.eml", "Please close the books by Friday.")
    result = invoke("ingest", "--db", str(db), str(finance), "--groups", "finance")
    assert result.exit_code == 0, result.output
    first.unlink()  # renamed, one line of its body edited
    renamed = finance_mail(finance / "close-q3.eml", "Please close the books by Thursday.")
    result = invoke("ingest", "--db", str(db), "--prune", str(finance), "--json")
    report = json.loads(result.stdout)
    assert (report["added"], report["pruned"], report["errors"]) == (2, 2, [])
    assert groups_in(db, attachment_of(renamed)) == FINANCE
    assert groups_in(db, str(renamed)) == FINANCE  # the mail it came in shows it was finance's
    assert not any(CANARY in text for text in seen_by(db, embedder, HR))
    assert any(CANARY in text for text in seen_by(db, embedder, FINANCE))


def test_a_mail_edited_and_moved_into_another_teams_watched_folder_keeps_its_groups(
    tmp_path: Path, embedder: Any
) -> None:
    finance, hr = tmp_path.resolve() / "finance", tmp_path.resolve() / "hr"
    hr.mkdir()
    db, log = tmp_path / "c.db", tmp_path / "log"
    first = finance_mail(finance / "close.eml", "Please close the books by Friday.")
    with watching_process(db, f"{finance}=finance", f"{hr}=hr", log=log) as process:
        wait_for(lambda: attachment_of(first) in sources(db), "the first sync")
        assert groups_in(db, attachment_of(first)) == FINANCE
        first.unlink()  # moved into hr's folder, one line of its body edited
        moved = finance_mail(hr / "close.eml", "Please close the books by Thursday.")
        wait_for(lambda: sources(db) == {str(moved), attachment_of(moved)}, "the move synced")
        assert groups_in(db, attachment_of(moved)) == FINANCE  # not hr's folder's
        assert groups_in(db, str(moved)) == FINANCE
        assert not any(CANARY in text for text in seen_by(db, embedder, HR))
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=DEADLINE_S)
    assert process.returncode == 0, log.read_text()


def test_an_hr_token_cannot_take_in_a_deleted_finance_attachments_text(
    tmp_path: Path, embedder: Any
) -> None:
    """hr mails the text of a pruned finance attachment in a new mail of its own, and saves
    it as a `.txt` beside: both are refused; the mail's own body is hr's."""
    pytest.importorskip("fastapi")
    from crag_edge.server import ServerConfig
    from crag_edge.server.tokens import TokenFile
    from tests.test_server import factory_for, running, wait_job

    root, db = tmp_path.resolve() / "root", tmp_path / "c.db"
    first = finance_mail(root / "finance" / "close.eml", "Please close the books by Friday.")
    settings = Settings.load(chunk_tokens=64, chunk_overlap=8)
    with Engine.open(db, settings, create=True, embedder=embedder) as owner:
        assert owner.ingest([root / "finance"], groups=FINANCE).added == 2
        first.unlink()
        assert owner.ingest([root / "finance"], prune=True).pruned == 2
    forward = finance_mail(root / "hr" / "forward.eml", "Forwarding the codes for our files.")
    (root / "hr" / "codes.txt").write_text(ATTACHED, encoding="utf-8")
    tokens = tmp_path / "tokens.db"
    secret = TokenFile(tokens).add("hr", "ingest", HR)
    config = ServerConfig(
        db=db,
        settings=ServerSettings(api_token="admin-secret", tokens_file=tokens),
        ingest_roots=(root,),
    )
    with (
        running(config, factory_for(db, embedder)) as service,
        service.client(token=secret, timeout=300.0) as as_hr,
    ):
        job = as_hr.post("/v1/ingest", json={"paths": ["hr"]}).json()["job"]["id"]
        report = wait_job(as_hr, job)["report"]
        hits = as_hr.post("/v1/query", json={"question": QUESTION, "mode": "bm25"}).content
    refused = {(str(root / "hr" / "codes.txt"), REFUSED), (attachment_of(forward), REFUSED)}
    assert {(e["source"], e["reason"]) for e in report["errors"]} == refused
    assert report["added"] == 1
    assert groups_in(db, str(forward)) == HR
    with Corpus.open(db, readonly=True) as corpus:
        assert attachment_of(forward) not in corpus.list_sources()
    assert CANARY.encode() not in hits
    assert not any(CANARY in text for text in seen_by(db, embedder, HR))
