"""Query expansion (local synonym table) and rewrite (local LLM).

Expansion adds a few synonyms per matching term and never leaves the machine; the table is
a TOML file (`synonyms_file`: `term = ["synonym", ...]`), with a small built-in default.
Rewriting asks the local LLM for a short keyword query — what search engines and bm25 want —
and falls back to the question's content words when no LLM is available or it fails.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from crag_edge.config import SettingsError
from crag_edge.grading.keywords import STOPWORDS
from crag_edge.models.chat_model import ChatModel, LlmCallError

# A general table of code and question words that retrieval benefits from.
DEFAULT_SYNONYMS: dict[str, list[str]] = {
    "function": ["method", "procedure", "routine", "callable"],
    "variable": ["parameter", "argument", "value", "identifier"],
    "error": ["exception", "failure", "bug", "issue"],
    "class": ["type", "object", "structure", "entity"],
    "async": ["asynchronous", "concurrent", "non-blocking"],
    "explain": ["describe", "clarify", "illustrate", "define"],
    "compare": ["contrast", "differentiate", "distinguish"],
    "implement": ["create", "build", "develop", "code"],
    "optimize": ["improve", "enhance", "refactor", "speed up"],
    "cause": ["reason", "origin", "trigger"],
    "effect": ["impact", "consequence", "outcome"],
    "increase": ["rise", "growth", "elevation"],
    "decrease": ["reduction", "decline", "drop"],
    "risk": ["likelihood", "probability", "hazard"],
    "treatment": ["therapy", "intervention", "medication"],
}
REWRITE_PROMPT = (
    "Rewrite the question as a short keyword query for a search engine: 3 to 8 keywords, "
    "no punctuation, no explanation. Reply with the keywords only."
)
_WORD = re.compile(r"[\w-]+", re.UNICODE)
_TERM_PART = re.compile(r"[\W_]+", re.UNICODE)  # "git-archive" has the terms git and archive
MIN_TERM_CHARS = 3


class SynonymTableError(SettingsError):
    """The synonyms file (the `synonyms_file` setting) is missing, unreadable or malformed;
    the message names the file."""


def load_synonyms(path: Path | None) -> dict[str, list[str]]:
    """The configured table, or the built-in one when no file is configured."""
    if path is None:
        return DEFAULT_SYNONYMS
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SynonymTableError(f"synonyms file not found: {path}") from None
    except OSError as exc:  # a folder, no permission
        raise SynonymTableError(f"synonyms file {path} cannot be read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SynonymTableError(f"synonyms file {path} is not valid TOML: {exc}") from None
    table: dict[str, list[str]] = {}
    for term, synonyms in data.items():
        if not isinstance(synonyms, list) or not all(isinstance(s, str) for s in synonyms):
            raise SynonymTableError(f"{path}: {term!r} must map to a list of strings")
        table[term.lower()] = synonyms
    return table


def expand(query: str, table: Mapping[str, list[str]], max_per_term: int = 2) -> str:
    """The query followed by up to `max_per_term` synonyms of each of its terms in the table."""
    added: list[str] = []
    for word in _WORD.findall(query.lower()):
        for synonym in table.get(word, [])[:max_per_term]:
            if synonym not in added and synonym not in query.lower():
                added.append(synonym)
    return f"{query} {' '.join(added)}" if added else query


def keywords(question: str) -> str:
    """The question's content words, in order, without repeats: the LLM-free rewrite."""
    words = [w for w in _WORD.findall(question.lower()) if w not in STOPWORDS and len(w) > 1]
    return " ".join(dict.fromkeys(words))


def rewrite(question: str, llm: ChatModel | None, timeout_s: float = 20.0) -> tuple[str, str]:
    """(keyword query, how it was made: "llm" or "keywords")."""
    if llm is not None:
        try:
            reply = llm.chat(
                [
                    {"role": "system", "content": REWRITE_PROMPT},
                    {"role": "user", "content": question},
                ],
                max_tokens=32,
                timeout_s=timeout_s,
            )
        except (LlmCallError, ValueError):
            reply = None
        if reply is not None and reply.finish_reason != "timeout":
            cleaned = " ".join(_WORD.findall(reply.text))[:200]
            if cleaned and shares_a_term(cleaned, question):
                return cleaned, "llm"
    return keywords(question) or question, "keywords"


def shares_a_term(query: str, question: str) -> bool:
    """Whether `query` keeps a content word of `question` (one word inside the other counts:
    "bee" and "honeybees", "archive" and "git-archive"). A keyword query without any is the
    model's guess at the answer ("5432" for a PostgreSQL port, "rm -rf" for removing a
    working tree): searching for it finds what the model believes, not what was asked."""
    asked = _terms(keywords(question))
    return any(_same_term(term, word) for term in _terms(query) for word in asked)


def _terms(text: str) -> list[str]:
    return [t for t in _TERM_PART.split(text.lower()) if t]


def _same_term(a: str, b: str) -> bool:
    """Equal, or one inside the other when both are long enough for that to mean something
    ("gc" is a term; "rm" is not inside "formats")."""
    if min(len(a), len(b)) < MIN_TERM_CHARS:
        return a == b
    return a in b or b in a
