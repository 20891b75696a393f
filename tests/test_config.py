"""Settings: env vars, KB_AGENT_* names, .env, TOML, precedence and errors that name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag_edge.config import Settings, SettingsError

pytestmark = pytest.mark.usefixtures("clean_env")


def test_defaults_follow_the_design() -> None:
    s = Settings.load()
    assert (s.vector_score_threshold, s.auto_approve_max_items, s.max_iterations) == (0.8, 2, 3)
    assert s.retrieval_mode == "hybrid" and s.rrf_k == 60


def test_kb_agent_env_names_are_honoured_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_VECTOR_SCORE_THRESHOLD", "0.65")
    monkeypatch.setenv("KB_AGENT_AUTO_APPROVE_MAX_ITEMS", "5")
    monkeypatch.setenv("KB_AGENT_MAX_ITERATIONS", "7")
    s = Settings.load()
    assert (s.vector_score_threshold, s.auto_approve_max_items, s.max_iterations) == (0.65, 5, 7)


def test_prefixed_env_vars_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CRAG_EDGE_TOP_K=7\nKB_AGENT_MAX_ITERATIONS=4\n")
    monkeypatch.setenv("CRAG_EDGE_CHUNK_TOKENS", "300")
    s = Settings.load()
    assert (s.top_k, s.max_iterations, s.chunk_tokens) == (7, 4, 300)


def test_toml_file_and_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "crag.toml"
    config.write_text("[crag_edge]\ntop_k = 12\nrrf_k = 30\nmax_iterations = 5\n")
    monkeypatch.setenv("CRAG_EDGE_RRF_K", "90")  # env beats the file
    s = Settings.load(config)
    assert (s.top_k, s.rrf_k, s.max_iterations) == (12, 90, 5)
    assert Settings.load(config, top_k=3).top_k == 3  # explicit arguments beat everything


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("KB_AGENT_VECTOR_SCORE_THRESHOLD", "1.5", "KB_AGENT_VECTOR_SCORE_THRESHOLD"),
        ("KB_AGENT_MAX_ITERATIONS", "many", "KB_AGENT_MAX_ITERATIONS"),
        ("CRAG_EDGE_TOP_K", "0", "CRAG_EDGE_TOP_K"),
        ("CRAG_EDGE_RETRIEVAL_MODE", "psychic", "CRAG_EDGE_RETRIEVAL_MODE"),
        ("CRAG_EDGE_CHUNK_OVERLAP", "500", "chunk_overlap"),
    ],
)
def test_invalid_values_fail_with_the_setting_named(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, named: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=named):
        Settings.load()


def test_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="config file not found"):
        Settings.load(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("top_k = \n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        Settings.load(broken)
    typo = tmp_path / "typo.toml"
    typo.write_text("top_kk = 3\n")
    with pytest.raises(SettingsError, match=r"unknown setting.*top_kk"):
        Settings.load(typo)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('top_k = "ten"\n')
    with pytest.raises(SettingsError, match="top_k"):
        Settings.load(wrong)


def test_config_path_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("candidates = 42\n")
    monkeypatch.setenv("CRAG_EDGE_CONFIG", str(config))
    assert Settings.load().candidates == 42
