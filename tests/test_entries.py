"""A definition entry's words said of the term beside it (`answer.entries`)."""

from __future__ import annotations

import pytest

from crag_edge.answer.entries import entries, passed_over, said_of_neighbour, value_of_unnamed
from crag_edge.result import ContextItem

POP = (
    "pop [--index] [-q|--quiet] [<stash>]\n\nRemove a single stashed state from the stash "
    "list and apply it on top of the current working tree state, i.e., do the inverse "
    "operation of git stash push. The working directory must match the index."
)
APPLY = (
    "apply [--index] [-q|--quiet] [<stash>]\n\nLike pop, but do not remove the state from the "
    "stash list. Unlike pop, <stash> may be any commit that looks like a commit created by "
    "stash push or stash create."
)
RENAME = (
    "rename [--[no-]progress] <old> <new>\n\nRename the remote named <old> to <new>. All "
    "remote-tracking branches and configuration settings for the remote are updated."
)
UPDATE = (
    "update [-p|--prune] [(<group>|<remote>)...]\n\nFetch updates for remotes or remote "
    "groups in the repository as defined by remotes.<group>. If neither group nor remote is "
    "specified on the command line, the configuration parameter remotes.default will be used."
)
STASH_Q = "Which git stash subcommand applies a stashed state and removes it from the stash list?"


def item(n: int, text: str, title: str) -> ContextItem:
    return ContextItem(n, n, n, "page.html", title, 0, len(text), text, "search", 0.5)


STASH = [item(3, POP, "git-stash(1)"), item(4, APPLY, "git-stash(1)")]
REMOTE = [item(3, UPDATE, "git-remote(1)"), item(6, RENAME, "git-remote(1)")]


def test_an_entry_is_named_by_its_terms_first_lower_case_word() -> None:
    assert [e.name for e in entries(POP + "\n\n" + APPLY)] == ["pop", "apply"]
    assert entries("NAME\n\ngit-stash - Stash the changes in a dirty working directory away") == []


@pytest.mark.parametrize(
    "claim",
    [
        "The git stash apply command applies a stashed state and removes it from the stash list.",
        "The `apply` subcommand removes a single stashed state from the stash list.",
    ],
)
def test_a_neighbours_name_with_the_entrys_definition_is_not_stated_there(claim: str) -> None:
    assert said_of_neighbour(claim, STASH_Q, STASH[0], STASH) == ("apply", "pop")


@pytest.mark.parametrize(
    ("claim", "question", "context"),
    [  # the entry's own name; a verb spelling the neighbour's; words every entry shares
        ("The git stash pop command applies a stashed state and removes it from the list.",
         STASH_Q, STASH),
        ("It removes a single stashed state from the stash list and applies it on top.",
         "What does git stash pop do?", STASH),
        ("The command `git remote rename` renames a git remote.",
         "Which command renames a git remote?", REMOTE),
    ],
)  # fmt: skip
def test_the_entrys_own_name_a_verb_or_shared_words_are_left_alone(
    claim: str, question: str, context: list[ContextItem]
) -> None:
    assert said_of_neighbour(claim, question, context[0], context) is None


RERERE = (
    "gc.rerereResolved\n\nRecords of conflicted merge you resolved earlier are kept for this "
    "many days when git rerere gc is run. The default is 60 days. See git-rerere(1)."
)
REFLOG_Q = "How long are reflog entries kept by default?"


def test_an_entrys_value_said_of_a_subject_the_passage_never_names() -> None:
    claim = "Reflog entries are kept for 60 days by default."
    found = value_of_unnamed(claim, REFLOG_Q, item(1, RERERE, "git-gc(1)"))
    assert found == ("reflog", "gc.rerereResolved")


@pytest.mark.parametrize(
    ("claim", "passage"),
    [  # the passage names the subject; the sentence names the entry; no value of its own
        ("Reflog entries are kept for 60 days by default.",
         RERERE + " Reflog entries are kept as long as gc.reflogExpire says."),
        ("Reflog entries are kept for 60 days, as gc.rerereResolved sets.", RERERE),
        ("Reflog entries are kept by default.", RERERE),
    ],
)  # fmt: skip
def test_a_subject_the_passage_names_or_the_entry_named_is_left_alone(
    claim: str, passage: str
) -> None:
    assert value_of_unnamed(claim, REFLOG_Q, item(1, passage, "git-gc(1)")) is None


def test_a_word_that_only_frames_the_question_is_no_subject() -> None:
    listen = "listen\n\nThe TCP port the server accepts connections on; 5432 unless changed."
    claim = "Default port is 5432."
    question = "What is the default port of the server?"
    assert value_of_unnamed(claim, question, item(1, listen, "server(1)")) is None


WORKTREE = (
    "If a working tree is deleted without using git worktree remove, then its administrative "
    "files will eventually be removed automatically, or you can run git worktree prune in "
    "the main or any linked worktree to clean up any stale administrative files."
)
WORKTREE_Q = "Which command removes a linked working tree?"


def test_a_command_named_over_the_sibling_the_question_names() -> None:
    claim = "The command to remove a linked working tree is `git worktree prune`."
    found = passed_over(claim, WORKTREE_Q, WORKTREE)
    assert found == ("git worktree prune", "git worktree remove")


@pytest.mark.parametrize(
    "claim",
    [  # the sibling the question names; a name in words; a two-word name
        "The command to remove a linked working tree is `git worktree remove`.",
        "The command to remove a linked working tree is git worktree prune.",
        "The command to remove a linked working tree is `worktree prune`.",
    ],
)
def test_the_question_named_command_or_another_shape_is_left_alone(claim: str) -> None:
    assert passed_over(claim, WORKTREE_Q, WORKTREE) is None
