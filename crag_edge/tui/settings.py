"""The settings screen: thresholds, grading tiers, fallback providers and the LLM, applied to
the next question and optionally saved to a TOML config file (`--config`)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.widgets import Button, Checkbox, Footer, Header, Input, Label

from crag_edge.config import PROVIDER_NAMES, TIERS, Settings, SettingsError
from crag_edge.tui.screens import CragScreen
from crag_edge.tui.widgets import BoundText

NUMBERS: tuple[tuple[str, str], ...] = (
    ("correct_threshold", "CORRECT at or above"),
    ("incorrect_threshold", "INCORRECT below"),
    ("discard_below", "drop items below"),
    ("max_iterations", "max iterations"),
    ("top_k", "hits retrieved (top_k)"),
)
EDITABLE = (*(name for name, _ in NUMBERS), "grading_tiers", "fallback_providers", "llm")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string


def save_settings(path: Path, settings: Settings, names: tuple[str, ...] = EDITABLE) -> None:
    """Write `names` into the TOML file at `path`, keeping its other keys (flat or under
    a [crag_edge] table, as `Settings.load` reads it). A file that is not TOML is refused
    (SettingsError, in `Settings.load`'s words), never overwritten."""
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
    nested = isinstance(data.get("crag_edge"), dict)
    table: dict[str, Any] = data["crag_edge"] if nested else data
    if any(isinstance(v, dict) for v in table.values()):
        raise SettingsError(f"{path} has tables other than [crag_edge]; edit it by hand")
    for name in names:
        table[name] = settings.value(name)
    lines = ["[crag_edge]"] if nested else []
    lines += [f"{key} = {toml_value(value)}" for key, value in table.items() if value is not None]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


class SettingsScreen(CragScreen[None]):
    """Edit the settings the next question uses."""

    DEFAULT_CSS = """
    SettingsScreen #form { padding: 0 1; }
    SettingsScreen .row { height: auto; margin: 0 0 1 0; }
    SettingsScreen .row Label { width: 26; }
    SettingsScreen .row Input { width: 1fr; height: 1; border: none; padding: 0 1; }
    SettingsScreen .row Input:focus { background: $boost; text-style: bold; }
    SettingsScreen .row Checkbox { width: auto; height: 1; border: none; padding: 0 1; }
    SettingsScreen #buttons { height: auto; padding: 1 0 0 0; }
    SettingsScreen #buttons Button { margin: 0 1 0 0; }
    SettingsScreen #settings-status { height: auto; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "apply(True)", "Apply & save"),
    ]

    AUTO_FOCUS = "#correct_threshold"
    status: var[RenderableType] = var[RenderableType]("Changes apply to the next question.")

    class Applied(Message):
        """Use `settings` from the next question on and, with `save_to`, write them to that
        TOML file. The app answers with `applied` or `refused`."""

        def __init__(self, form: SettingsScreen, settings: Settings, save_to: Path | None):
            super().__init__()
            self.form = form
            self.settings = settings
            self.save_to = save_to

    def __init__(self, settings: Settings, config_path: Path | None) -> None:
        """`settings` fill the form; `config_path` is where "Apply & save" writes by default."""
        super().__init__()
        self.settings = settings
        self.config_path = config_path

    def compose(self) -> ComposeResult:
        settings = self.settings
        yield Header()
        with VerticalScroll(id="form"):
            for name, label in NUMBERS:
                with Horizontal(classes="row"):
                    yield Label(label)
                    yield Input(str(settings.value(name)), id=name)
            with Horizontal(classes="row"):
                yield Label("grading tiers")
                for tier in TIERS:
                    yield Checkbox(tier, tier in settings.grading.grading_tiers, id=f"tier-{tier}")
            with Horizontal(classes="row"):
                yield Label("fallback providers")
                for provider in PROVIDER_NAMES:
                    on_ = provider in settings.correction.fallback_providers
                    yield Checkbox(provider, on_, id=f"fallback-{provider}")
            with Horizontal(classes="row"):
                yield Label("LLM (manifest id)")
                yield Input(settings.models.llm, id="llm")
            with Horizontal(classes="row"):
                yield Label("config file")
                yield Input(str(self.config_path or "crag-edge.toml"), id="config")
            with Horizontal(id="buttons"):
                yield Button("Apply", id="apply", variant="primary")
                yield Button("Apply & save", id="save", variant="success")
        yield BoundText(id="settings-status").data_bind(shown=SettingsScreen.status)
        yield Footer()

    def edited(self) -> Settings:
        """The current settings with this form's values; raises SettingsError."""
        typed = {box.id: box.value.strip() for box in self.query(Input)}
        ticked = {box.id for box in self.query(Checkbox) if box.value}
        changes: dict[str, Any] = {}
        for name, _ in NUMBERS:
            raw = typed[name]
            try:
                changes[name] = int(raw) if name in ("max_iterations", "top_k") else float(raw)
            except ValueError:
                raise SettingsError(f"{name}: {raw!r} is not a number") from None
        changes["grading_tiers"] = [t for t in TIERS if f"tier-{t}" in ticked]
        changes["fallback_providers"] = [p for p in PROVIDER_NAMES if f"fallback-{p}" in ticked]
        changes["llm"] = typed["llm"]
        return self.settings.replace(**changes)

    @on(Button.Pressed, "#apply")
    @on(Input.Submitted)
    def _apply_pressed(self) -> None:
        self.action_apply(False)

    @on(Button.Pressed, "#save")
    def _save_pressed(self) -> None:
        self.action_apply(True)

    def action_apply(self, save: bool) -> None:
        """Check the form here; applying (and saving) is the app's, which answers."""
        try:
            settings = self.edited()
        except SettingsError as exc:
            self.refused(exc)
            return
        path = Path(self.query_one("#config", Input).value.strip() or "crag-edge.toml")
        self.post_message(self.Applied(self, settings, path if save else None))

    def applied(self, settings: Settings, saved_to: Path | None) -> None:
        self.settings = settings
        message = "Applied: the next question uses these settings."
        if saved_to is not None:
            self.config_path = saved_to
            message += f" Saved to {saved_to} (load it with --config {saved_to})."
        self.status = message
        self.notify(message)

    def not_saved(self, settings: Settings, error: Exception) -> None:
        """Applied, but the config file could not be written."""
        self.settings = settings
        message = f"Applied to the next question, but not saved: {error}"
        self.status = Text(message, style="yellow")

    def refused(self, error: Exception) -> None:
        self.status = Text(str(error), style="red")
