"""Who is asking: a principal (the token's name, its scope, its groups) and the scope order.

Scopes form one ladder, each including every one below it: `query` (search and the graded
evidence), `answer` (also the service's own written answers, which spend the shared LLM),
`ingest` (also add documents, follow one's own ingest jobs, corpus statistics) and `admin`
(everything: every job, `/metrics`, every document whatever its groups). A ladder rather than
independent flags because each step only adds cost or reach to the one below: nobody who may
ingest documents should be refused a search of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from crag_edge.groups import CorpusView, Groups

Scope = Literal["query", "answer", "ingest", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)


def scope_rank(scope: Scope) -> int:
    return SCOPES.index(scope)


@dataclass(frozen=True)
class Principal:
    """The caller of one request. `name` is the token's name (None: the local owner of a
    service without tokens); `groups` are the document groups a non-admin token may read."""

    name: str | None
    scope: Scope
    groups: frozenset[str] = field(default_factory=frozenset)

    def allows(self, needed: Scope) -> bool:
        return scope_rank(self.scope) >= scope_rank(needed)

    @property
    def view(self) -> CorpusView:
        """What the engine may show this caller (`crag_edge.groups`): every document for
        admin; the untagged ones and its token's groups' for anyone else."""
        return CorpusView.everything() if self.scope == "admin" else CorpusView.of(self.groups)

    @property
    def visible_groups(self) -> Groups:
        """The groups of `view` (None: every document), for what takes them as a set: what a
        result may show (`server.caller_view`), whose documents an ingest may change."""
        return self.view.groups

    @property
    def job_owner(self) -> str | None:
        """Whose ingest jobs this caller may see, count or follow: None, everyone's, for
        admin; its own (by token name) for anyone else, whose groups other jobs may not share."""
        return None if self.allows("admin") else self.name


# A service without any token listens on loopback only: whoever reaches it owns the machine.
LOCAL_OWNER = Principal(None, "admin")
