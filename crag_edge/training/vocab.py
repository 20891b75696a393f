"""Edits of the evaluator's `tokenizer.json`: vocabulary pruning, the segment pair template.

The word-embedding table is most of a small BERT's size.
MiniLM's 30,522 x 384 table is 11.7 MB even at int8, more than four transformer layers. The
BERT uncased vocabulary lists whole words and `##` pieces roughly by corpus frequency (ids
1996 onwards), so keeping the first N ordinary tokens keeps the common ones. Every single
character and its `##` form are always kept, so WordPiece still spells any word out of
smaller pieces instead of giving up with [UNK]. Pruning happens before fine-tuning, so the
model is trained on exactly the tokenization it will see at inference.
"""

from __future__ import annotations

import copy
from typing import Any

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PREFIX = "##"


def _is_character(token: str) -> bool:
    return len(token) == 1 or (token.startswith(PREFIX) and len(token) == len(PREFIX) + 1)


def kept_token_ids(vocab: dict[str, int], size: int) -> list[int]:
    """Old ids to keep, ascending: specials, every character piece, then the lowest-id
    (most frequent) other tokens until `size` ids are chosen. [unusedN] slots are dropped."""
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise ValueError(f"not a BERT WordPiece vocabulary: no {', '.join(missing)}")
    ordinary = [(i, t) for t, i in vocab.items() if not t.startswith("[unused")]
    required = {i for i, t in ordinary if t in SPECIAL_TOKENS or _is_character(t)}
    if size < len(required):
        raise ValueError(
            f"vocab size {size} is below the {len(required)} special and single-character "
            "tokens that keep every word spellable"
        )
    kept = set(required)
    for i, _ in sorted(ordinary):
        if len(kept) >= size:
            break
        kept.add(i)
    return sorted(kept)


def prune_tokenizer(tokenizer: dict[str, Any], size: int) -> tuple[dict[str, Any], list[int]]:
    """A copy of a `tokenizer.json` document with at most `size` tokens, and the old id of
    each new id (the rows to take from the embedding table, in order)."""
    model = tokenizer.get("model", {})
    if model.get("type") != "WordPiece":
        raise ValueError(f"vocab pruning needs a WordPiece tokenizer, not {model.get('type')!r}")
    vocab: dict[str, int] = model["vocab"]
    kept = kept_token_ids(vocab, size)
    by_id = {i: t for t, i in vocab.items()}
    new_id = {old: new for new, old in enumerate(kept)}
    pruned = copy.deepcopy(tokenizer)
    pruned["model"]["vocab"] = {by_id[old]: new for old, new in new_id.items()}
    token_id = pruned["model"]["vocab"]
    for added in pruned.get("added_tokens", []):
        if added["content"] in token_id:
            added["id"] = token_id[added["content"]]
    pruned["added_tokens"] = [a for a in pruned.get("added_tokens", []) if a["content"] in token_id]
    post = pruned.get("post_processor") or {}
    for special in post.get("special_tokens", {}).values():
        special["ids"] = [token_id[t] for t in special["tokens"]]
    padding = pruned.get("padding")
    if padding:
        padding["pad_id"] = token_id[padding.get("pad_token", "[PAD]")]
    return pruned, kept


def segment_pair_template(tokenizer: dict[str, Any]) -> dict[str, Any]:
    """A copy whose pair template is "[CLS] A [SEP] [CLS] B [SEP]" (B's tokens type 1): the
    segment scorer then sees each text exactly as the embedder does when it is alone."""
    edited = copy.deepcopy(tokenizer)
    post = edited.get("post_processor") or {}
    pair = post.get("pair")
    if post.get("type") != "TemplateProcessing" or not pair:
        raise ValueError("the segment scorer needs a BERT tokenizer with a pair template")
    second = next(
        (i for i, piece in enumerate(pair) if piece.get("Sequence", {}).get("id") == "B"), None
    )
    if second is None:
        raise ValueError("the tokenizer's pair template has no second sequence")
    if "SpecialToken" not in pair[second - 1] or pair[second - 1]["SpecialToken"]["id"] != "[CLS]":
        pair.insert(second, {"SpecialToken": {"id": "[CLS]", "type_id": 1}})
    return edited
