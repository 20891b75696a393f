"""Settings: env vars, KB_AGENT_* names, .env, TOML, precedence and errors that name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag_edge.config import SECTION_OF, SECTIONS, Settings, SettingsError

pytestmark = pytest.mark.usefixtures("clean_env")


def test_defaults_follow_the_design() -> None:
    s = Settings.load()
    grading = s.grading
    assert (grading.vector_score_threshold, grading.auto_approve_max_items) == (0.8, 2)
    assert s.correction.max_iterations == 3
    assert s.retrieval.retrieval_mode == "hybrid" and s.retrieval.rrf_k == 60


def test_kb_agent_env_names_are_honoured_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_VECTOR_SCORE_THRESHOLD", "0.65")
    monkeypatch.setenv("KB_AGENT_AUTO_APPROVE_MAX_ITEMS", "5")
    monkeypatch.setenv("KB_AGENT_MAX_ITERATIONS", "7")
    s = Settings.load()
    grading = s.grading
    assert (grading.vector_score_threshold, grading.auto_approve_max_items) == (0.65, 5)
    assert s.correction.max_iterations == 7


def test_prefixed_env_vars_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CRAG_EDGE_TOP_K=7\nKB_AGENT_MAX_ITERATIONS=4\n")
    monkeypatch.setenv("CRAG_EDGE_CHUNK_TOKENS", "300")
    s = Settings.load()
    assert (s.retrieval.top_k, s.correction.max_iterations, s.ingest.chunk_tokens) == (7, 4, 300)


@pytest.mark.parametrize(
    "line",
    ["CRAG_EDGE_TOP_K 5", "CRAG_EDGE_TOP_K: 5", "CRAG_EDGE_TOP_K", "KB_AGENT_MAX_ITERATIONS"],
)
def test_a_dotenv_line_that_sets_nothing_is_an_error_naming_it(
    tmp_path: Path, line: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """python-dotenv would skip it (with a warning naming no file, or in silence for a bare
    name), and the setting the user wrote would be lost without a word."""
    (tmp_path / ".env").write_text(f"CRAG_EDGE_RRF_K=30\n{line}\n")
    with pytest.raises(SettingsError) as raised:
        Settings.load()
    assert str(raised.value) == (
        f"{tmp_path / '.env'} line 2: {line!r} sets nothing; write NAME=value"
    )
    assert capfd.readouterr().err == ""


def test_a_dotenv_may_name_other_tools_variables_bare(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("DEBUG\nCRAG_EDGE_TOP_K=4\n")
    assert Settings.load().retrieval.top_k == 4


def test_toml_file_and_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "crag.toml"
    config.write_text("[crag_edge]\ntop_k = 12\nrrf_k = 30\nmax_iterations = 5\n")
    monkeypatch.setenv("CRAG_EDGE_RRF_K", "90")  # env beats the file
    s = Settings.load(config)
    assert (s.retrieval.top_k, s.retrieval.rrf_k, s.correction.max_iterations) == (12, 90, 5)
    assert Settings.load(config, top_k=3).retrieval.top_k == 3  # explicit arguments beat all


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


@pytest.mark.parametrize("table", ["crag_edge = 5", 'crag_edge = "x"', "crag_edge = [1]"])
def test_a_crag_edge_key_that_is_not_a_table_is_a_config_error(tmp_path: Path, table: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(table + "\n")
    with pytest.raises(SettingsError, match=r"`crag_edge` must be a table \(\[crag_edge\]\)"):
        Settings.load(config)


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('model_dir = "/tmp/models\\u0000"', "CRAG_EDGE_MODEL_DIR"),
        ('llm_model_name = "qwen\\u0000"', "CRAG_EDGE_LLM_MODEL_NAME"),
        ('server_ingest_roots = ["/srv/docs\\u0000"]', "CRAG_EDGE_SERVER_INGEST_ROOTS"),
        ('tavily_api_key = "tvly-secret\\nX-Injected: 1"', "CRAG_EDGE_TAVILY_API_KEY"),
        ('searxng_url = "http://127.0.0.1:8888\\u001b[2J"', "CRAG_EDGE_SEARXNG_URL"),
    ],
)
def test_control_characters_in_a_setting_are_refused_naming_it(
    tmp_path: Path, line: str, named: str
) -> None:
    """A NUL names no file and no host; a line break in a key would become a second header
    line (and its error would print the key). Paths may hold other control characters."""
    config = tmp_path / "c.toml"
    config.write_text(line + "\n")
    with pytest.raises(SettingsError, match=f"{named}.*control character") as raised:
        Settings.load(config)
    assert "secret" not in str(raised.value)


def test_a_config_file_too_large_for_settings_is_refused_unread(tmp_path: Path) -> None:
    """A model or a corpus named by mistake is refused by its size, not read whole."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(range(256)) * 8192)
    with pytest.raises(SettingsError, match=r"is 2,097,156 B, more than a settings file holds"):
        Settings.load(model)


def test_config_path_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("candidates = 42\n")
    monkeypatch.setenv("CRAG_EDGE_CONFIG", str(config))
    assert Settings.load().retrieval.candidates == 42


def test_every_flat_name_is_one_field_of_one_section() -> None:
    declared = [name for section in SECTIONS.values() for name in section.model_fields]
    assert len(declared) == len(set(declared)) == len(SECTION_OF)
    assert not set(declared) & set(SECTIONS), "a flat name would shadow a section table"


def test_toml_section_tables_and_flat_keys_together(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "crag.toml"
    config.write_text("top_k = 4\n[retrieval]\nrrf_k = 30\n[grading]\ndiscard_below = 0.2\n")
    monkeypatch.setenv("CRAG_EDGE_CANDIDATES", "50")  # env still fills the same section
    s = Settings.load(config)
    assert (s.retrieval.top_k, s.retrieval.rrf_k, s.retrieval.candidates) == (4, 30, 50)
    assert s.grading.discard_below == 0.2
    misplaced = tmp_path / "misplaced.toml"
    misplaced.write_text("[grading]\ntop_k = 4\n")
    with pytest.raises(SettingsError, match=r"unknown setting.*grading\.top_k"):
        Settings.load(misplaced)
    bad = tmp_path / "bad.toml"
    bad.write_text("[retrieval]\ntop_k = 0\n")
    with pytest.raises(SettingsError, match="CRAG_EDGE_TOP_K / top_k"):
        Settings.load(bad)


def test_keyword_arguments_take_flat_names_and_sections() -> None:
    with pytest.raises(SettingsError, match=r"unknown setting.*top_kk"):
        Settings.load(top_kk=3)
    base = Settings.load(top_k=3)
    whole = Settings.load(retrieval=base.retrieval.model_copy(update={"rrf_k": 7}))
    assert (whole.retrieval.top_k, whole.retrieval.rrf_k) == (3, 7)
    assert Settings.load(retrieval={"candidates": 9}).retrieval.candidates == 9


def test_replace_validates_and_keeps_what_was_set_explicitly() -> None:
    s = Settings.load(calibration_llm=(1.0, 0.0))
    changed = s.replace(top_k=4, discard_below=0.1)
    assert (changed.retrieval.top_k, changed.grading.discard_below) == (4, 0.1)
    assert s.retrieval.top_k == 10, "the original is unchanged"
    # Corpus calibration yields to explicit calibration settings only: the marks survive.
    assert changed.grading.model_fields_set == {"calibration_llm", "discard_below"}
    with pytest.raises(SettingsError, match="CRAG_EDGE_TOP_K / top_k"):
        s.replace(top_k=0)
    with pytest.raises(SettingsError, match="incorrect_threshold"):
        s.replace(incorrect_threshold=0.9)
    with pytest.raises(SettingsError, match="judge_focus_tokens"):
        s.replace(judge_focus_tokens=8)
    assert s.value("top_k") == 10 and s.value("llm") == s.models.llm


def test_settings_are_frozen_so_no_change_skips_validation() -> None:
    """`replace` is the way to change a setting: it validates, an assignment would not."""
    settings = Settings.load()
    with pytest.raises(ValueError, match="frozen"):
        settings.retrieval.top_k = 0
    with pytest.raises(ValueError, match="frozen"):
        settings.retrieval = settings.retrieval.model_copy()
    assert settings.retrieval.top_k == Settings.load().retrieval.top_k
