"""Follow-up questions made standalone before retrieval.

Retrieval and grading see one question, not a conversation: "and how do I undo it?" finds
nothing by itself. A question that leans on earlier turns — a referring word ("it", "they",
"that"), a leading "and" or "what about", or fewer content words than a search needs — is
rewritten from the conversation by the local LLM. Without an LLM (or when its reply is
unusable) the content words of the last user turn that the question lacks are appended: what
bm25 and the embedder need to find the same documents again. A question that stands on its
own is left as asked, and so is every question asked without history.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from crag_edge.correction.expand import keywords
from crag_edge.models.chat_model import ChatModel, LlmCallError, Message

# With the worked example, Qwen2.5-1.5B (the default LLM) rewrites "Does it work on network
# file systems?" after a question on SQLite WAL into "Does SQLite write-ahead logging work on
# network file systems?"; SmolLM2-135M echoes or answers instead (`usable_rewrite` rejects it).
FOLLOW_UP_PROMPT = (
    "Rewrite the user's last question so that it can be understood without the conversation: "
    "replace words such as it, they or that with what they refer to. Keep it one short "
    "question. Reply with the rewritten question only.\n\n"
    "Example:\nConversation:\nuser: How do I create a git branch?\n"
    "assistant: Use git branch NAME.\nLast question: And how do I delete it?\n"
    "Rewritten: How do I delete a git branch?"
)
_WORD = re.compile(r"[\w-]+", re.UNICODE)
# Words that point back at something said before.
REFERRING = frozenset(
    _WORD.findall(
        "it its they them their theirs this that these those there he him his she her "
        "one ones former latter same"
    )
)
LEADING = ("and ", "but ", "or ", "so ", "then ", "what about ", "how about ", "also ")
MIN_CONTENT_WORDS = 3
# The turns the LLM sees, newest last, each cut to this many characters: enough to resolve
# a reference, small enough for any model's context.
TURNS_SHOWN = 6
TURN_CHARS = 600
# "Rewritten:", "Standalone question:", or a chat role that a small model echoes ("user:").
_LABEL = re.compile(r"^(rewritten|standalone|user|assistant)?\s*(question)?\s*:\s*", re.IGNORECASE)


def depends_on_history(question: str) -> bool:
    """Whether `question` likely cannot be searched without the turns before it."""
    lowered = " ".join(question.lower().split())
    if lowered.startswith(LEADING):
        return True
    if any(word in REFERRING for word in _WORD.findall(lowered)):
        return True
    return len(keywords(question).split()) < MIN_CONTENT_WORDS


def standalone_question(
    question: str,
    history: Sequence[Message],
    llm: Callable[[], ChatModel | None],
    timeout_s: float = 20.0,
) -> tuple[str, str] | None:
    """(standalone question, how it was made: "llm" or "keywords"), or None when the
    question needs no rewrite (no earlier user turn, or it stands on its own). `llm` is
    asked for the model only then: a standalone question never loads it."""
    earlier = [turn for turn in history if turn.get("role") in ("user", "assistant")]
    last_user = next((t["content"] for t in reversed(earlier) if t["role"] == "user"), None)
    if last_user is None or not depends_on_history(question):
        return None
    runtime = llm()
    if runtime is not None:
        rewritten = _llm_rewrite(question, earlier, runtime, timeout_s)
        if rewritten is not None:
            return rewritten, "llm"
    asked = set(keywords(question).split())
    missing = [word for word in keywords(last_user).split() if word not in asked]
    if not missing:
        return None
    return f"{question.strip()} {' '.join(missing)}", "keywords"


def _llm_rewrite(
    question: str, turns: Sequence[Message], llm: ChatModel, timeout_s: float
) -> str | None:
    """The LLM's standalone question; None when it fails, stalls, or gives no usable one."""
    transcript = "\n".join(
        f"{turn['role']}: {' '.join(turn['content'].split())[:TURN_CHARS]}"
        for turn in turns[-TURNS_SHOWN:]
    )
    messages = [
        {"role": "system", "content": FOLLOW_UP_PROMPT},
        {"role": "user", "content": f"Conversation:\n{transcript}\nLast question: {question}"},
    ]
    try:
        reply = llm.chat(messages, max_tokens=64, timeout_s=timeout_s)
    except (LlmCallError, ValueError):
        return None
    return None if reply.finish_reason == "timeout" else usable_rewrite(reply.text, question)


def usable_rewrite(reply: str, question: str) -> str | None:
    """The reply's first line without a "Rewritten:" label, when it is a rewrite: not empty,
    not the question again, and a question when the original was one (small models answer
    instead, or ramble)."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    text = _LABEL.sub("", lines[0]).strip(" \"'") if lines else ""
    if not text or " ".join(text.lower().split()) == " ".join(question.lower().split()):
        return None
    if question.rstrip().endswith("?") and not text.endswith("?"):
        return None
    return text[:300]
