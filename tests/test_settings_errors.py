"""Settings and options a user gets wrong: each is refused where it enters, with one line that
names the variable or option, and exit 2; nothing starts half-configured and no folder
appears that the user did not make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import ServerSettings, Settings, SettingsError, setting_fields
from crag_edge.server import ServerConfig, ServerConfigError

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("clean_env")


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


def assert_one_line_exit_2(result: Any, *named: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for name in named:
        assert name in lines[0], (name, lines[0])


def assert_usage_error(result: Any, *named: str) -> str:
    """Exit 2 with the command line's usage hint and an error naming the option; returns
    the error text with the box and line breaks of the terminal layout removed."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    text = " ".join(result.stderr.replace("│", " ").split())
    for name in named:
        assert name in text, (name, text)
    return text


# -- options ---------------------------------------------------------------------------------


def top_k_bounds() -> tuple[int, int]:
    """The bounds the top_k setting declares (CRAG_EDGE_TOP_K is checked against these)."""
    metadata = setting_fields()["top_k"].metadata
    low = next(m.ge for m in metadata if hasattr(m, "ge"))
    high = next(m.le for m in metadata if hasattr(m, "le"))
    return int(low), int(high)


@pytest.mark.parametrize("command", ["query", "answer"])
@pytest.mark.parametrize("value", ["0", "-1", "99999999999999999999999", "1001"])
def test_top_k_out_of_the_settings_range_is_a_usage_error(command: str, value: str) -> None:
    result = invoke(command, "--db", "never-opened.db", "question", "--top-k", value)
    low, high = top_k_bounds()
    bound = low if int(value) < low else high
    assert_usage_error(result, "--top-k", f"equal to {bound}")
    with pytest.raises(SettingsError, match="CRAG_EDGE_TOP_K"):
        Settings.load(top_k=int(value))  # the setting refuses the same values


def test_an_unknown_mode_is_a_usage_error() -> None:
    result = invoke("query", "--db", "never-opened.db", "question", "--mode", "psychic")
    assert_usage_error(result, "--mode", "psychic")


def test_an_unknown_log_level_is_a_usage_error() -> None:
    result = invoke("serve", "--db", "never-opened.db", "--log-level", "bogus")
    assert_usage_error(result, "--log-level", "bogus")


# -- settings --------------------------------------------------------------------------------


def write_env_file(folder: Path, content: bytes) -> None:
    (folder / ".env").write_bytes(content)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CRAG_EDGE_GRADING_TIERS": "not json"}, "CRAG_EDGE_GRADING_TIERS"),
        ({"CRAG_EDGE_FAST_PATH_RULES": "[read_file"}, "CRAG_EDGE_FAST_PATH_RULES"),
        ({"CRAG_EDGE_CALIBRATION_LLM": "1.0, 2.0"}, "CRAG_EDGE_CALIBRATION_LLM"),
        ({"CRAG_EDGE_CALIBRATION_SIGNALS": "[1e400, 1]"}, "CRAG_EDGE_CALIBRATION_SIGNALS"),
        ({"CRAG_EDGE_LLM": "qwen\udcff"}, "CRAG_EDGE_LLM"),  # a byte that is not UTF-8
        ({"CRAG_EDGE_FALLBACK_PROVIDERS": '["searxng"]'}, "CRAG_EDGE_SEARXNG_URL"),
        ({"CRAG_EDGE_FALLBACK_PROVIDERS": '["tavily"]'}, "CRAG_EDGE_TAVILY_API_KEY"),
        ({"CRAG_EDGE_FALLBACK_PROVIDERS": '["local"]'}, "CRAG_EDGE_FALLBACK_DB"),
    ],
)
def test_bad_settings_exit_2_naming_the_variable(env: dict[str, str], named: str) -> None:
    assert_one_line_exit_2(invoke("stats", "--db", "never-opened.db", env=env), named)


def test_a_dotenv_that_is_not_utf8_exits_2_naming_the_file(tmp_path: Path) -> None:
    write_env_file(tmp_path, b"CRAG_EDGE_TOP_K=5\nCRAG_EDGE_LLM=\xff\xfe\n")
    assert_one_line_exit_2(invoke("stats", "--db", "never-opened.db"), ".env", "UTF-8")


def test_a_fallback_provider_with_what_it_needs_is_accepted(tmp_path: Path) -> None:
    searxng = {"fallback_providers": ["searxng"], "searxng_url": "http://127.0.0.1:8888"}
    assert Settings.load(**searxng).correction.fallback_providers == ["searxng"]
    local = Settings.load(fallback_providers=["local"], fallback_db=tmp_path / "other.db")
    assert local.correction.fallback_providers == ["local"]


def test_the_audit_log_must_be_a_file_in_an_existing_folder(tmp_path: Path) -> None:
    folder = invoke("stats", "--db", "x.db", env={"CRAG_EDGE_AUDIT_LOG": str(tmp_path)})
    assert_one_line_exit_2(folder, "CRAG_EDGE_AUDIT_LOG", "folder")
    missing = tmp_path / "no-such-folder" / "audit.jsonl"
    inside_missing = invoke("stats", "--db", "x.db", env={"CRAG_EDGE_AUDIT_LOG": str(missing)})
    assert_one_line_exit_2(inside_missing, "CRAG_EDGE_AUDIT_LOG", "no-such-folder")
    assert not missing.parent.exists()  # refused, not created behind the user's back
    fine = tmp_path / "audit.jsonl"
    assert Settings.load(audit_log=fine).correction.audit_log == fine


# -- the API token off loopback --------------------------------------------------------------


@pytest.mark.parametrize("token", [" ", " " * 20, "short-token", "fifteen-chars!!"])
def test_a_weak_token_is_refused_off_loopback(tmp_path: Path, token: str) -> None:
    with pytest.raises(ServerConfigError, match="16"):
        ServerConfig(
            db=tmp_path, settings=ServerSettings(api_token=token), host="0.0.0.0"
        ).validate_bind()
    ServerConfig(
        db=tmp_path, settings=ServerSettings(api_token=token), host="127.0.0.1"
    ).validate_bind()


def test_a_token_of_16_characters_may_listen_off_loopback(tmp_path: Path) -> None:
    ServerConfig(
        db=tmp_path, settings=ServerSettings(api_token="sixteen-chars-ok"), host="0.0.0.0"
    ).validate_bind()


def test_serve_with_a_weak_token_off_loopback_exits_2_naming_the_variable() -> None:
    result = invoke(
        "serve", "--db", "never-opened.db", "--host", "0.0.0.0", env={"CRAG_EDGE_API_TOKEN": " "}
    )
    assert_one_line_exit_2(result, "CRAG_EDGE_API_TOKEN", "16")
