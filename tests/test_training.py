"""The evaluator trainer: pairs, resumable labelling and training, ONNX export, registration.

Tests that train need PyTorch (the `train` extra) and are skipped only when it is missing;
the rest (pairs, vocabulary pruning, manifest writing) run everywhere.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import time
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.evaluation.pairs import Pair
from crag_edge.models.bert_onnx import convert_bert
from crag_edge.models.cross_encoder import OnnxCrossEncoder
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.manifest import load_manifest
from crag_edge.models.onnx_session import plain_tokenizer
from crag_edge.models.provision import pull_model
from crag_edge.models.registry import load_cross_encoder
from crag_edge.training import TRAIN_HINT, TorchMissingError, require_torch
from crag_edge.training.data import (
    LabelOptions,
    LabelStore,
    LabelStoreError,
    PairBuilder,
    human_unit,
    is_validation,
    label_corpus,
    normalise,
    pseudo_query,
)
from crag_edge.training.export import register
from crag_edge.training.vocab import kept_token_ids, prune_tokenizer, segment_pair_template
from crag_edge.types import Chunk
from tests.fixtures import MINILM

needs_torch = pytest.mark.skipif(
    find_spec("torch") is None, reason=f"PyTorch is not installed: {TRAIN_HINT}"
)
runner = CliRunner()

DOCS = {
    "bees.txt": "The waggle dance of honeybees. A forager returns to the hive and dances on the "
    "comb. The angle of the waggle run to the vertical gives the direction of the food "
    "relative to the sun. The duration of the run encodes the distance to the flowers. "
    "Karl von Frisch decoded the dance and shared a Nobel Prize for it in 1973.",
    "wal.txt": "Write-ahead logging in SQLite. Changes are appended to a separate WAL file "
    "instead of overwriting the database. Readers keep reading the old pages while a writer "
    "appends, so readers never block writers. A checkpoint copies the pages back into the "
    "database file when the log grows past a threshold.",
    "leaves.txt": "How leaves capture light. Chlorophyll absorbs red and blue light and "
    "reflects green, which is why leaves look green. The light reactions split water and "
    "release oxygen. The Calvin cycle then fixes carbon dioxide into sugars with the enzyme "
    "RuBisCO, which is slow but abundant.",
    "rrf.txt": "Reciprocal rank fusion merges ranked lists. Each document scores the sum of "
    "one over k plus its rank in every list. It needs no score normalisation, which is why "
    "it combines lexical and dense retrieval so well. The constant k is usually sixty.",
    "tides.txt": "Why the sea has tides. The moon's gravity pulls the ocean into two bulges "
    "on opposite sides of the earth. As the earth turns, a coast passes through both "
    "bulges every day, giving two high tides. Spring tides happen when sun and moon align.",
    "bread.txt": "Baking bread with yeast. Yeast ferments sugars in the dough and releases "
    "carbon dioxide, which the gluten network traps, so the dough rises. Kneading develops "
    "the gluten. Baking kills the yeast and sets the crumb while the crust browns.",
}
HUMAN = [
    Pair("how do bees tell others where food is", DOCS["bees.txt"], 1),
    Pair("how do bees tell others where food is", DOCS["bread.txt"], 0),
    Pair("does a reader block a writer in sqlite", DOCS["wal.txt"], 1),
]


@pytest.fixture(scope="module")
def tiny_env(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> dict[str, Any]:
    """A model folder holding only MiniLM (linked), and a six-document corpus built with it."""
    root = tmp_path_factory.mktemp("training")
    model_dir = root / "models"
    model_dir.mkdir()
    (model_dir / MINILM).symlink_to(minilm_dir.resolve(), target_is_directory=True)
    if not (minilm_dir / "model.onnx").is_file():
        pull_model(load_manifest().get(MINILM), model_dir)  # verifies and converts only
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    settings = Settings(model_dir=model_dir)
    db = root / "tiny.db"
    with Engine.open(db, settings, create=True) as engine:
        engine.ingest([docs])
    labels = root / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps(p.__dict__) + "\n" for p in HUMAN),
        encoding="utf-8",
    )
    return {"root": root, "model_dir": model_dir, "db": db, "labels": labels}


def _chunk(text: str, title: str = "", ordinal: int = 0) -> Chunk:
    return Chunk(1, 1, ordinal, text, 0, len(text), "doc.txt", title)


def test_pseudo_queries_use_the_title_or_cut_a_sentence_out() -> None:
    body = " ".join(f"Sentence number {i} talks about a different subject here." for i in range(6))
    query, passage, origin = pseudo_query(_chunk(body, "How honeybees find flowers")) or ("",) * 3
    assert (query, passage, origin) == ("How honeybees find flowers", body, "title")
    query, passage, origin = pseudo_query(_chunk(body, "Short", ordinal=2)) or ("",) * 3
    assert origin == "sentence" and query not in passage and query in body
    assert pseudo_query(_chunk("Too short.")) is None


def test_vocab_pruning_keeps_every_word_spellable(minilm_dir: Path, tmp_path: Path) -> None:
    doc = json.loads((minilm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    pruned, rows = prune_tokenizer(doc, 3000)
    assert len(rows) == 3000 == len(pruned["model"]["vocab"])
    (tmp_path / "t.json").write_text(json.dumps(pruned), encoding="utf-8")
    small, full = (
        plain_tokenizer(tmp_path / "t.json"),
        plain_tokenizer(minilm_dir / "tokenizer.json"),
    )
    text = ("the photosynthesis of xylophones", "Zymurgy is the chemistry of fermentation")
    encoding = small.encode(*text)
    assert "[UNK]" not in encoding.tokens and encoding.tokens[0] == "[CLS]"
    assert encoding.ids[0] == pruned["model"]["vocab"]["[CLS]"]
    assert full.encode(*text).tokens[:2] == encoding.tokens[:2]  # common words unchanged
    assert [rows[i] for i in encoding.ids[:2]] == full.encode(*text).ids[:2]  # rows map back
    assert len(kept_token_ids(doc["model"]["vocab"], 40_000)) == 30522 - 994  # no [unusedN]
    with pytest.raises(ValueError, match="spellable"):
        prune_tokenizer(doc, 100)


def test_require_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("crag_edge.training.importlib.util.find_spec", lambda name: None)
    with pytest.raises(TorchMissingError, match=r"pip install 'crag-edge\[train\]'"):
        require_torch()


def test_labelling_resumes_after_interruption(tiny_env: dict[str, Any], tmp_path: Path) -> None:
    settings = Settings(model_dir=tiny_env["model_dir"])
    options = LabelOptions(max_pairs=1000, negatives=2, pool=5)
    identity = {"db": "tiny", "seed": 13}

    def run(path: Path, stop_after: int | None) -> LabelStore:
        with Engine.open(tiny_env["db"], settings, readonly=True) as engine:
            store = LabelStore(path, identity)
            builder = PairBuilder(engine.corpus, engine.retriever, options)

            def on_unit(_: int) -> None:
                if stop_after is not None and len(store.done) >= stop_after:
                    raise KeyboardInterrupt

            with contextlib.suppress(KeyboardInterrupt):
                label_corpus(builder, HUMAN, store, deadline=time.monotonic() + 60, on_unit=on_unit)
            return store

    whole = run(tmp_path / "whole.jsonl", None)
    assert {p.origin for p in whole.pairs} >= {"human", "human-mined", "sentence"}
    mined = [p for p in whole.pairs if p.origin == "human-mined"]
    for p in mined:  # never one of the passages labelled for the same query
        labelled = [normalise(h.passage) for h in HUMAN if h.query == p.query]
        assert all(normalise(p.passage) not in text for text in labelled)
    assert mined

    path = tmp_path / "resumed.jsonl"
    assert len(run(path, 2).done) == 2
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"unit": "chunk:9", "pairs": [{"que')  # a write cut by the interruption
    resumed = run(path, None)
    assert resumed.pairs == whole.pairs
    assert len(path.read_text(encoding="utf-8").splitlines()) == 1 + len(whole.done)
    with pytest.raises(LabelStoreError, match="another run"):
        LabelStore(path, {"db": "other"})


@needs_torch
def test_training_resumes_from_its_checkpoint(tiny_env: dict[str, Any], tmp_path: Path) -> None:
    import torch

    from crag_edge.training.model import from_pretrained
    from crag_edge.training.trainer import TrainConfig, Trainer

    minilm = tiny_env["model_dir"] / MINILM
    doc = json.loads((minilm / "tokenizer.json").read_text(encoding="utf-8"))
    pruned, rows = prune_tokenizer(doc, 2000)  # a small embedding table keeps steps fast
    (tmp_path / "tokenizer.json").write_text(json.dumps(pruned), encoding="utf-8")
    tokenizer = plain_tokenizer(tmp_path / "tokenizer.json")
    tokenizer.enable_truncation(128, strategy="longest_first")
    texts = [(q, p) for q, p in zip(DOCS, DOCS.values(), strict=True)]
    encodings = tokenizer.encode_batch(texts)
    labels = [float(i % 2) for i in range(len(texts))]
    config = TrainConfig(batch_size=3, epochs=2, checkpoint_every_s=3600)

    def trainer(folder: Path) -> Trainer:
        model = from_pretrained(minilm, layers=1, vocab_rows=rows, max_positions=128, seed=1)
        folder.mkdir(exist_ok=True)
        return Trainer(model, encodings, labels, config, folder, "run")

    straight = trainer(tmp_path / "a")
    report = straight.train(time.monotonic() + 120)
    assert report.complete and report.steps_done == report.total_steps == 4

    def interrupt(step: int, _total: int, _loss: float) -> None:
        if step == 2:
            raise KeyboardInterrupt

    first = trainer(tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        first.train(time.monotonic() + 120, on_step=interrupt)
    second = trainer(tmp_path / "b")
    resumed = second.train(time.monotonic() + 120)
    assert resumed.resumed_from == 2 and resumed.complete and resumed.steps_done == 4
    for name, value in straight.model.state_dict().items():
        assert torch.allclose(value, second.model.state_dict()[name], atol=1e-6), name


@needs_torch
def test_untrained_segment_scorer_is_the_embedders_cosine(
    minilm_dir: Path, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    """The property the segment architecture rests on: before any training, the exported
    graph scores a pair with exactly the embedder's cosine (head 1·cos + 0)."""
    from crag_edge.training.model import from_pretrained, save_checkpoint

    model = from_pretrained(
        minilm_dir, layers=6, vocab_rows=None, max_positions=256, seed=1, architecture="segment"
    )
    doc = json.loads((minilm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    save_checkpoint(model, segment_pair_template(doc), tmp_path)
    graph = convert_bert(tmp_path, tmp_path / "model.onnx", "classification")
    scorer = OnnxCrossEncoder(graph, tmp_path / "tokenizer.json", "segment", threads=1)
    query, passages = "how do bees tell others where food is", list(DOCS.values())
    probabilities = np.asarray(scorer.score(query, passages).scores)
    got = np.log(probabilities / (1 - probabilities))
    vectors = np.asarray(embedder.embed([query, *passages]))
    want = vectors[1:] @ vectors[0]
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_segment_pair_template_adds_a_second_cls_once(minilm_dir: Path) -> None:
    doc = json.loads((minilm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    edited = segment_pair_template(doc)
    assert segment_pair_template(edited) == edited
    tokenizer = Tokenizer.from_str(json.dumps(edited))
    encoding = tokenizer.encode("a question", "a passage")
    assert " ".join(encoding.tokens[:8]) == "[CLS] a question [SEP] [CLS] a passage [SEP]"
    assert encoding.type_ids[:8] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert "pair" in doc["post_processor"] and len(doc["post_processor"]["pair"]) == 5
    with pytest.raises(ValueError, match="pair template"):
        segment_pair_template({**doc, "post_processor": None})


@needs_torch
def test_train_command_end_to_end(tiny_env: dict[str, Any]) -> None:
    """Label, train, export, check against torch, register, verify: well within a minute."""
    from crag_edge.training.cli import evaluator_app

    model_dir, out = tiny_env["model_dir"], tiny_env["root"] / "out"
    env = {"CRAG_EDGE_MODEL_DIR": str(model_dir)}
    args = ["train", "--db", str(tiny_env["db"]), "--out", str(out)]
    args += ["--labels", str(tiny_env["labels"]), "--layers", "1", "--vocab-size", "3000"]
    args += ["--epochs", "1", "--budget-minutes", "1", "--no-llm-labels", "--model-id", "tiny-ce"]
    started = time.monotonic()
    result = runner.invoke(evaluator_app, [*args, "--json"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 60
    report = json.loads(result.stdout)
    assert report["checks"]["onnx_fp32_max_abs_diff"] < 1e-4
    assert report["checks"]["onnx_int8_max_abs_diff"] < 1.0
    assert report["data"]["origins"]["human"] == len(HUMAN)
    assert set(report["registered"]["files"].values()) == {"ok"}
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "tiny-ce" in card and "Reproduce" in card and "--layers 1" in card

    verify = runner.invoke(app, ["models", "verify", "tiny-ce"], env=env, catch_exceptions=False)
    assert verify.exit_code == 0 and verify.stdout.count("ok tiny-ce/") == 4
    scorer = load_cross_encoder(Settings(model_dir=model_dir).models)
    assert scorer is not None and scorer.name == "tiny-ce"
    scores = scorer.score("how do bees tell others where food is", list(DOCS.values())).scores
    assert len(scores) == len(DOCS) and all(0.0 <= s <= 1.0 for s in scores)

    again = runner.invoke(evaluator_app, [*args, "--json"], env=env, catch_exceptions=False)
    assert again.exit_code == 0  # everything resumed: labels and training state reused
    assert json.loads(again.stdout)["training"]["resumed_from"] == report["training"]["steps_done"]


def test_register_writes_a_manifest_the_loader_reads_and_prefers(tmp_path: Path) -> None:
    folder = tmp_path / "release"
    folder.mkdir()
    for name in ("model.int8.onnx", "tokenizer.json", "config.json", "MODEL_CARD.md"):
        (folder / name).write_text(f"{name} 'quoted' \"text\" é\n", encoding="utf-8")
    register(tmp_path, "first", folder, 'data: "CC BY 4.0"', "one")
    spec = register(tmp_path, "second", folder, "Apache-2.0", "two")
    manifest = load_manifest(tmp_path)
    assert [m.model_id for m in manifest.by_role("cross-encoder")][:2] == ["first", "second"]
    assert manifest.get("first").license == 'data: "CC BY 4.0"'
    assert spec.files[0].sources[0].kind == "local" and spec.files[0].size > 0
    report = pull_model(spec, tmp_path)
    assert report.ok and (tmp_path / "second" / "MODEL_CARD.md").is_file()


def test_package_sources_copy_files_shipped_inside_the_package(tmp_path: Path) -> None:
    from crag_edge.models.manifest import ModelFile, ModelSpec, Source
    from crag_edge.models.provision import sha256_of

    shipped = Path(__file__).resolve().parent.parent / "crag_edge" / "models" / "manifest.toml"
    source = Source(kind="package", package="crag_edge.models", member="manifest.toml")
    missing = Source(kind="package", package="crag_edge.models", member="nope.bin")
    spec = ModelSpec(
        "pkg",
        "cross-encoder",
        "Apache-2.0",
        "",
        (
            ModelFile(
                "manifest.toml", shipped.stat().st_size, sha256_of(shipped), (missing, source)
            ),
        ),
    )
    report = pull_model(spec, tmp_path)
    assert report.ok and "no file 'nope.bin'" in report.files[0].failures[0]
    assert source.describe() == "package crag_edge.models/manifest.toml"


@pytest.mark.models
def test_llm_labeller_writes_questions_and_soft_labels(
    tiny_env: dict[str, Any], tmp_path: Path
) -> None:
    """Plumbing only, on SmolLM2-135M (far too small to label well): generative queries and
    judge-blended soft labels reach the labels file."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the llm extra)")
    from crag_edge.grading.calibration import Identity
    from crag_edge.grading.labeller import LlmLabeller
    from crag_edge.grading.llm_judge import LlmJudge
    from crag_edge.models.llm import LlamaRuntime
    from crag_edge.models.registry import installed_file

    smol = "smollm2-135m-instruct"
    real = Settings.load().models
    path = installed_file(real, smol, load_manifest(real.model_dir).get(smol).files[0].name)
    runtime = LlamaRuntime(path, model_id=smol, n_ctx=2048, n_threads=1, timeout_s=120)
    labeller = LlmLabeller(runtime, LlmJudge(runtime), Identity())
    settings = Settings(model_dir=tiny_env["model_dir"])
    with Engine.open(tiny_env["db"], settings, readonly=True) as engine:
        store = LabelStore(tmp_path / "labels.jsonl", {"llm": smol})
        options = LabelOptions(max_pairs=3, negatives=1, pool=5)
        builder = PairBuilder(engine.corpus, engine.retriever, options, labeller)
        assert label_corpus(builder, [], store, deadline=time.monotonic() + 300)
    assert store.pairs and all(0.0 <= p.label <= 1.0 for p in store.pairs)
    assert all(p.origin.endswith(f"+{smol}") for p in store.pairs)
    positives = [p for p in store.pairs if "mined" not in p.origin and "random" not in p.origin]
    assert all(p.label >= 0.5 for p in positives)  # (1 + judge) / 2


def _script(name: str) -> ModuleType:
    """A script of scripts/ loaded as a module (scripts/ is not a package)."""
    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


EVIDENCE = [
    "Honeybees communicate the location of food with a dance.",
    "A forager returns to the hive and dances on the vertical comb.",
    "The angle of the waggle run gives the direction relative to the sun.",
    "Other workers follow the dancer and memorise the run.",
    "The duration of the waggle run encodes the distance to the flowers.",
    "Karl von Frisch decoded the dance and shared a Nobel Prize in 1973.",
]
DISTANCE_CLAIM = "Bees encode the distance to food in how long they waggle."
NEI_CLAIM = "Bread rises because yeast releases carbon dioxide."


@pytest.fixture(scope="module")
def scifact_like(tiny_env: dict[str, Any]) -> dict[str, Any]:
    """A three-abstract SciFact-like folder (corpus and train claims) and a corpus ingested
    from it in chunks of about two sentences, so an abstract has several chunks."""
    root = tiny_env["root"] / "scifact_like"
    root.mkdir()
    abstracts = {"11": " ".join(EVIDENCE), "22": DOCS["bread.txt"], "33": DOCS["tides.txt"]}
    lines = [json.dumps({"_id": key, "title": "", "text": text}) for key, text in abstracts.items()]
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "claims_train.csv").write_text(
        "id,claim,evidence_doc_id,evidence_label,evidence_sentences,cited_doc_ids\n"
        f"1,{DISTANCE_CLAIM},11,SUPPORT,[4],[11]\n2,{NEI_CLAIM},,,[],[22]\n",
        encoding="utf-8",
    )
    settings = Settings(model_dir=tiny_env["model_dir"], chunk_tokens=24, chunk_overlap=0)
    db = root / "scifact.db"
    with Engine.open(db, settings, create=True) as engine:
        engine.ingest([root / "corpus.jsonl"], fmt="beir")
    return {"root": root, "db": db, "settings": settings}


def test_chunk_pairs_label_the_chunks_holding_a_rationale(scifact_like: dict[str, Any]) -> None:
    script = _script("scifact_chunk_pairs")
    claims = script.read_claims(scifact_like["root"] / "claims_train.csv")
    assert claims == {DISTANCE_CLAIM: {"11": {4}}, NEI_CLAIM: {}}
    with Engine.open(scifact_like["db"], scifact_like["settings"], readonly=True) as engine:
        train, heldout = script.all_pairs(
            claims, engine.corpus, lambda q: engine.search(q, mode="hybrid", top_k=2)
        )
        evidence = script.chunks_by_source(engine.corpus)["beir:11"]
    assert len(evidence) >= 3  # the abstract's other chunks are the hard negatives
    text = " ".join(EVIDENCE)
    start = text.index(EVIDENCE[4])
    end = start + len(EVIDENCE[4])
    expected = {c.text: int(c.start < end and start < c.end) for c in evidence}
    assert 1 in expected.values() and 0 in expected.values()
    pairs = train + heldout
    labelled = {p.passage: p.label for p in pairs if p.query == DISTANCE_CLAIM}
    assert len(labelled) == sum(p.query == DISTANCE_CLAIM for p in pairs)  # each chunk once
    assert {k: labelled[k] for k in expected} == expected
    assert [p.label for p in pairs if p.query == NEI_CLAIM] == [0, 0]  # its hits: negatives
    assert all((p in heldout) == is_validation(human_unit(p.query)) for p in pairs)


def test_chunk_pairs_by_abstract_count_every_evidence_chunk(
    scifact_like: dict[str, Any],
) -> None:
    script = _script("scifact_chunk_pairs")
    claims = script.read_claims(scifact_like["root"] / "claims_train.csv")
    with Engine.open(scifact_like["db"], scifact_like["settings"], readonly=True) as engine:
        train, heldout = script.all_pairs(
            claims,
            engine.corpus,
            lambda q: engine.search(q, mode="hybrid", top_k=2),
            script.abstract_label,
        )
        evidence = {c.text for c in script.chunks_by_source(engine.corpus)["beir:11"]}
    labels = {p.passage: p.label for p in train + heldout if p.query == DISTANCE_CLAIM}
    assert {text: labels[text] for text in evidence} == dict.fromkeys(evidence, 1)
    assert [p.label for p in train + heldout if p.query == NEI_CLAIM] == [0, 0]


def test_chunk_pairs_refuse_a_rationale_past_the_last_sentence(
    scifact_like: dict[str, Any],
) -> None:
    script = _script("scifact_chunk_pairs")
    with (
        Engine.open(scifact_like["db"], scifact_like["settings"], readonly=True) as engine,
        pytest.raises(script.ClaimDataError, match="index 6 of 6 sentences"),
    ):
        script.all_pairs({DISTANCE_CLAIM: {"11": {6}}}, engine.corpus, lambda q: [])


def test_question_pairs_label_the_asked_sentence_and_its_chunks(
    scifact_like: dict[str, Any],
) -> None:
    script = _script("scifact_question_pairs")
    sentences = script.abstract_sentences(" ".join(EVIDENCE))
    assert sentences == EVIDENCE
    question = script.Question("beir:11", 4, EVIDENCE[4], "How do bees encode distance?")
    by_sentence = list(script.sentence_pairs(question, sentences))
    assert by_sentence[0] == Pair(question.question, EVIDENCE[4], 1)
    assert len(by_sentence) == 1 + script.SENTENCE_NEGATIVES
    assert {p.passage for p in by_sentence[1:]} <= set(EVIDENCE[:4] + EVIDENCE[5:])
    assert all(p.label == 0 for p in by_sentence[1:])
    with Engine.open(scifact_like["db"], scifact_like["settings"], readonly=True) as engine:
        chunks = engine.corpus.get_chunks(engine.corpus.chunk_ids()).values()
        own = sorted((c for c in chunks if c.source == "beir:11"), key=lambda c: c.ordinal)
        by_chunk = list(script.chunk_pairs(question, own, engine))
    holding = {c.text for c in own if EVIDENCE[4][:40] in " ".join(c.text.split())}
    labels = {p.passage: p.label for p in by_chunk}
    assert holding and all(labels[text] == 1 for text in holding)
    assert all(labels[c.text] == 0 for c in own if c.text not in holding)
    others = [p for p in by_chunk if p.passage not in {c.text for c in own}]
    assert others and all(p.label == 0 for p in others)  # other abstracts' hits


def test_question_sentences_skip_those_that_lean_on_the_one_before() -> None:
    script = _script("scifact_question_pairs")
    sentences = [
        "These results show that the waggle run encodes the distance to food sources.",
        "Short.",
        "The duration of the waggle run encodes the distance to the flowers found.",
    ]
    assert script.chosen_sentence("beir:1", sentences) == 2
    assert script.chosen_sentence("beir:1", sentences[:2]) is None


def test_question_pairs_never_use_held_out_claims_abstracts(tmp_path: Path) -> None:
    script = _script("scifact_question_pairs")
    claims = [f"Claim number {i} about bees." for i in range(40)]
    rows = [f"{i},{claim},{100 + i},SUPPORT,[0],[{200 + i}]" for i, claim in enumerate(claims)]
    path = tmp_path / "claims_train.csv"
    header = "id,claim,evidence_doc_id,evidence_label,evidence_sentences,cited_doc_ids"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    held = [i for i, claim in enumerate(claims) if is_validation(human_unit(claim))]
    assert held  # 40 claims: some are held out
    expected = {str(100 + i) for i in held} | {str(200 + i) for i in held}
    assert script.heldout_abstracts(path) == expected


def test_human_units_are_keyed_as_scripts_split_them(tiny_env: dict[str, Any]) -> None:
    settings = Settings(model_dir=tiny_env["model_dir"])
    with Engine.open(tiny_env["db"], settings, readonly=True) as engine:
        builder = PairBuilder(engine.corpus, engine.retriever, LabelOptions())
        keys = [key for key, _ in builder.units(HUMAN) if key.startswith("human:")]
    assert keys == [human_unit(q) for q in dict.fromkeys(p.query for p in HUMAN)]
