"""`SearchScreen` (ctrl+f): find the passages for a question without the model, as
`crag-edge search` does: each with its place and a snippet, the question's words marked;
the highlighted one is shown whole below.

The search runs in a thread worker (the embedder and the store never run on the event loop)
with the app's engine, passed down as `engine`.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import var
from textual.widgets import Footer, Header, Input, OptionList
from textual.widgets.option_list import Option

from crag_edge.citations import locator
from crag_edge.console.output import line, marked
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.retrieval.passages import Passage
from crag_edge.text_boundary import QuestionError, asked_question
from crag_edge.tui.screens import CragScreen
from crag_edge.tui.widgets import Plain

PROMPT = "Type words to find and press Enter: passages and their places, no model."


def passage_option(passage: Passage) -> Text:
    """The passage's rank and place in bold, then its snippet with the marked words."""
    snippet = passage.snippet
    head = line((f"{passage.hit.rank}. {locator(passage.hit.chunk)}", "bold"))
    return Text("\n").join([head, line(*marked(snippet.text, snippet.marks))])


class SearchScreen(CragScreen[None]):
    """The search box, the ranked passages, and the highlighted passage whole."""

    DEFAULT_CSS = """
    SearchScreen #search-question { margin: 0 1; }
    SearchScreen #passages { height: 1fr; border: round $primary; }
    SearchScreen #passage-scroll { height: 1fr; border: round $secondary; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    engine: var[Engine | None] = var(None, init=False)
    """The app's open engine; None until a corpus is open."""

    def __init__(self, engine: Engine | None) -> None:
        super().__init__()
        self.set_reactive(SearchScreen.engine, engine)
        self.found: list[Passage] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="Search the corpus…", id="search-question")
        passages = OptionList(id="passages", markup=False)
        passages.border_title = "Passages"
        yield passages
        with VerticalScroll(id="passage-scroll") as scroll:
            scroll.border_title = "Passage"
            yield Plain(PROMPT, id="passage")
        yield Footer()

    @on(Input.Submitted, "#search-question")
    def _submitted(self, event: Input.Submitted) -> None:
        shown = self.query_one("#passage", Plain)
        try:
            question = asked_question(event.value)
        except QuestionError as exc:
            shown.update(f"Nothing to search for: {exc}.")
            return
        if self.engine is None:
            shown.update("No corpus is open yet: open one with F3, or ingest with ctrl+o.")
            return
        shown.update(f"Searching for: {question}")
        self.run_search(self.engine, question)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_search(self, engine: Engine, question: str) -> None:
        try:
            found = engine.search_passages(question, view=CorpusView.everything())
        except Exception as exc:  # the store or the embedder: said in the panel, not a crash
            self.app.call_from_thread(self._failed, f"{type(exc).__name__}: {exc}")
            return
        self.app.call_from_thread(self._show, found)

    def _show(self, found: list[Passage]) -> None:
        self.found = found
        passages = self.query_one("#passages", OptionList)
        passages.clear_options()
        passages.add_options(
            Option(passage_option(passage), id=str(index)) for index, passage in enumerate(found)
        )
        if not found:
            self.query_one("#passage", Plain).update("No passages: nothing matches.")
            return
        passages.highlighted = 0
        passages.focus()

    def _failed(self, message: str) -> None:
        self.query_one("#passage", Plain).update(Text(f"Search failed: {message}", style="red"))

    @on(OptionList.OptionHighlighted, "#passages")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is None:
            return
        passage = self.found[int(event.option.id)]
        chunk = passage.hit.chunk
        self.query_one("#passage-scroll").border_title = f"Passage · {locator(chunk)}"
        self.query_one("#passage", Plain).update(chunk.text)
