"""The README and docs/ against the code they describe: every command and setting is
documented, the README's Python example runs, and every relative link leads to a file."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer

from crag_edge.cli import app
from crag_edge.config import SECTION_OF

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def readme() -> str:
    return README.read_text(encoding="utf-8")


def command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every leaf command as its words, e.g. ("eval", "grading"). Typer vendors its own click,
    so a group is recognised by having sub-commands, not by its class."""
    paths: list[tuple[str, ...]] = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        paths += command_paths(command, path) if hasattr(command, "commands") else [path]
    return paths


def test_every_command_is_documented_in_the_readme() -> None:
    commands = command_paths(typer.main.get_command(app))
    assert ("calibrate",) in commands and ("eval", "answers") in commands
    text = readme()
    missing = [" ".join(c) for c in commands if f"crag-edge {' '.join(c)}" not in text]
    assert not missing, f"commands without a line in the README: {missing}"


def test_every_command_is_documented_in_the_commands_page() -> None:
    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    commands = command_paths(typer.main.get_command(app))
    missing = [" ".join(c) for c in commands if f"`{' '.join(c)}" not in page]
    assert not missing, f"commands without a word in docs/commands.md: {missing}"


def help_texts(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(where, text) of every command's help and every option's and argument's."""
    texts = [(" ".join(prefix) or "crag-edge", group.help or "")]
    texts += [
        (f"{' '.join(prefix)} {p.name}", getattr(p, "help", None) or "") for p in group.params
    ]
    for name, command in getattr(group, "commands", {}).items():
        texts += help_texts(command, (*prefix, name))
    return texts


def test_no_help_text_breaks_a_line_inside_a_paragraph() -> None:
    """The terminal wraps help at its own width; a line break kept from a docstring's source
    broke it mid-sentence (`console.commands.flowing`). Paragraphs stay apart."""
    texts = help_texts(typer.main.get_command(app))
    assert len(texts) > 100 and any(where == "answer" for where, _ in texts)
    broken = [where for where, text in texts if "\n" in text.replace("\n\n", "")]
    assert not broken, f"help texts with a line break inside a paragraph: {broken}"


SETTINGS_PAGE = ROOT / "docs" / "settings.md"


def settings_rows(text: str) -> str:
    """The table rows of a page, where each setting is named in the first column."""
    return "\n".join(line for line in text.splitlines() if line.startswith("| `"))


def readme_settings_table(text: str) -> str:
    """The rows of the README's "Settings" section: the settings most often changed."""
    return settings_rows(text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0])


def test_every_setting_is_in_the_settings_page() -> None:
    missing = [
        name
        for name in SECTION_OF
        if f"`{name}`" not in settings_rows(SETTINGS_PAGE.read_text(encoding="utf-8"))
    ]
    assert not missing, f"settings without a row in docs/settings.md: {missing}"


def test_the_readme_settings_table_names_real_settings_and_links_the_page() -> None:
    section = readme().split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    table = readme_settings_table(readme())
    assert table.count("\n") >= 5, "the README's Settings section lost its table"
    named = {
        name
        for row in table.splitlines()
        for name in re.findall(r"`([a-z_0-9]+)`", row.split("|")[1])
    }
    assert named <= set(SECTION_OF), f"README rows name unknown settings: {named - set(SECTION_OF)}"
    assert "(docs/settings.md)" in section


def test_the_settings_check_would_catch_a_missing_row() -> None:
    text = SETTINGS_PAGE.read_text(encoding="utf-8").replace(
        "| `score_cache` |", "| `score_kept` |"
    )
    assert "`score_cache`" not in settings_rows(text)


def python_example(text: str) -> str:
    match = re.search(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert match, "the README has no ```python example"
    return match.group(1)


@pytest.mark.models
@pytest.mark.slow
def test_the_readme_python_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run as a user runs it from the checkout: a working directory holding sample_corpus/.
    The root conftest selects the small test LLM; nothing else is changed."""
    shutil.copytree(ROOT / "sample_corpus", tmp_path / "sample_corpus")
    monkeypatch.chdir(tmp_path)
    exec(compile(python_example(readme()), "README.md", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert (tmp_path / "demo.db").is_file()
    assert re.match(r"(CORRECT|AMBIGUOUS|INCORRECT) - \S", out), out
    assert re.search(r"^\[1\] \S*sqlite-wal\.md \d+-\d+$", out, re.MULTILINE), out
    finish = re.search(r"^finish: (\w+)$", out, re.MULTILINE)
    assert finish and finish.group(1) in {"stop", "length", "timeout", "insufficient_evidence"}


def relative_links(path: Path) -> list[str]:
    """Links to files of the repository; code blocks and inline code are not links."""
    prose = re.sub(r"`[^`\n]*`", "", FENCED.sub("", path.read_text(encoding="utf-8")))
    targets = [target.split("#", 1)[0] for target in LINK.findall(prose)]
    return [t for t in targets if t and not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file_in_the_repository(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        resolved = (page.parent / target).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing in the repository: {broken}"


def test_the_link_check_sees_links_and_skips_code(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "See [a](docs/a.md#part), ![b](b.svg) and [web](https://example.org).\n"
        "`[c](in-code.md)`\n```\n[d](in-block.md)\n```\n",
        encoding="utf-8",
    )
    assert relative_links(page) == ["docs/a.md", "b.svg"]


ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "crag_edge"
TOP_ENTRY = re.compile(r"^  (\S+)")  # a top-level entry of the module tree: `  store/ ...`


def module_tree_entries(page: str) -> dict[str, str]:
    """The text of each top-level entry of the module tree (the first fenced block after
    "## Modules"), keyed by its name (`store/`, `engine.py`), continuation lines included."""
    tree = page.split("## Modules", 1)[-1].split("```", 2)[1]
    entries: dict[str, str] = {}
    name = ""
    for line in tree.splitlines():
        if top := TOP_ENTRY.match(line):
            name = top.group(1)
        if name:
            entries[name] = entries.get(name, "") + line + "\n"
    return entries


def unnamed_modules(page: str, package: Path) -> list[str]:
    """Each module and subpackage under `package` its module tree does not name: a top-level
    module or package by its own entry (`engine.py`, `store/`), anything deeper by its name
    (`fts_terms`, `routers/`) in its top-level package's entry. `__init__` and `__main__`
    are their package."""
    entries = module_tree_entries(page)
    missing = set()
    for path in package.rglob("*.py"):
        *folders, name = path.relative_to(package).parts
        if path.stem in ("__init__", "__main__"):
            if not folders:
                continue  # the package itself
            folders, name = folders[:-1], folders[-1] + "/"
        shown = "".join(f"{folder}/" for folder in folders) + name
        if not folders:
            named = name in entries
        else:
            word = re.escape(name) if name.endswith("/") else re.escape(path.stem) + r"\b"
            named = re.search(r"\b" + word, entries.get(folders[0] + "/", "")) is not None
        if not named:
            missing.add(shown)
    return sorted(missing)


def test_the_architecture_page_names_every_module() -> None:
    missing = unnamed_modules(ARCHITECTURE.read_text(encoding="utf-8"), PACKAGE)
    assert not missing, (
        "modules docs/architecture.md does not name (add each to the module tree, in its "
        "package's entry with its one job):\n  " + "\n  ".join(missing)
    )


def test_the_module_check_would_catch_an_unnamed_module(tmp_path: Path) -> None:
    for module in [
        "engine.py",
        "store/__init__.py",
        "store/corpus.py",
        "store/pg/__init__.py",
        "store/pg/pool.py",
        "lonely.py",
        "tools/__init__.py",
    ]:
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    page = "## Modules\n\n```\npkg/\n  engine.py  the top\n  store/  corpus (one file), pg/\n```\n"
    assert unnamed_modules(page, tmp_path) == ["lonely.py", "store/pg/pool.py", "tools/"]
