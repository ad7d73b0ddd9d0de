"""Internal: Documents and chunks from what users have: strings, dicts, LangChain ``Document``s, LlamaIndex
nodes and ``NodeWithScore``s (duck-typed: no framework is imported), folders and JSONL files.

A chunk is a :class:`ragmeter.data.Context` with an id, so retrieval metrics can match it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragmeter.data import Context

__all__ = ["document_text", "document_id", "as_context", "load_documents", "chunk_documents", "tokens"]

_ID_KEYS = ("id", "doc_id", "document_id", "chunk_id", "source", "file_name", "file_path")
_WORD = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (the one tokenizer of baselines and test sets)."""
    return _WORD.findall(text.lower())


def _node(obj: Any) -> Any:
    """A LlamaIndex ``NodeWithScore``'s node, else the object itself."""
    node = getattr(obj, "node", None)
    return node if node is not None and hasattr(node, "get_content") else obj


def document_text(obj: Any) -> str:
    """The text of a string, a dict (``text`` / ``page_content`` / ``content``), a Context, a
    LangChain ``Document`` (``page_content``) or a LlamaIndex node (``get_content()`` / ``text``)."""
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        for key in ("text", "page_content", "content"):
            if isinstance(obj.get(key), str):
                return obj[key]
        raise ValueError(f"a document dict needs a 'text', 'page_content' or 'content' string, got keys {sorted(obj)}")
    node = _node(obj)
    for attr in ("page_content", "text"):
        value = getattr(node, attr, None)
        if isinstance(value, str):
            return value
    if callable(getattr(node, "get_content", None)):
        return str(node.get_content())
    raise ValueError(
        f"cannot read the text of a {type(obj).__name__} (expected a string, a dict, a LangChain "
        f"Document or a LlamaIndex node)"
    )


def document_id(obj: Any) -> str | None:
    """The id of a dict (``id``), a Context, a LangChain ``Document`` (``id`` or metadata
    ``id`` / ``source`` ...) or a LlamaIndex node (``node_id`` / ``id_``); None when it has none."""
    if isinstance(obj, str):
        return None
    if isinstance(obj, dict):
        meta: dict = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        found = (
            obj.get("id")
            if obj.get("id") is not None
            else next((meta[k] for k in _ID_KEYS if meta.get(k) is not None), None)
        )
        return None if found is None else str(found)
    node = _node(obj)
    for attr in ("id", "node_id", "id_"):
        value = getattr(node, attr, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    meta = getattr(node, "metadata", None) or {}
    found = next((meta[k] for k in _ID_KEYS if isinstance(meta, dict) and meta.get(k) is not None), None)
    return None if found is None else str(found)


def as_context(obj: Any, position: int = 0) -> Context:
    """A :class:`Context` from anything :func:`document_text` reads, keeping its id, score
    (``NodeWithScore.score``, dict ``score``) and metadata."""
    if isinstance(obj, Context):
        return obj
    if isinstance(obj, str):
        return Context(obj, rank=position + 1)
    score = obj.get("score") if isinstance(obj, dict) else getattr(obj, "score", None)
    meta = obj.get("metadata") if isinstance(obj, dict) else getattr(_node(obj), "metadata", None)
    return Context(
        document_text(obj),
        id=document_id(obj),
        rank=position + 1,
        score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
        metadata=dict(meta) if isinstance(meta, dict) else {},
    )


def load_documents(path: str | Path) -> list[dict]:
    """Documents ``[{id, text}]`` from a folder of ``.txt`` / ``.md`` files (id: the path
    relative to the folder) or a JSONL file of ``{id, text}`` objects."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in (".txt", ".md"))
        if not files:
            raise ValueError(f"{path}: no .txt or .md files")
        return [{"id": p.relative_to(path).as_posix(), "text": p.read_text(encoding="utf-8")} for p in files]
    docs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{n}: not JSON ({err.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise ValueError(f"{path}:{n}: expected an object with a 'text' string")
        docs.append({"id": str(record.get("id", n)), "text": record["text"], "metadata": record.get("metadata") or {}})
    return docs


def _pieces(text: str, size: int) -> list[str]:
    """``text`` cut at paragraph, then sentence boundaries into pieces of at most ~``size`` chars."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    units: list[tuple[str, str]] = []  # (text, separator before it when joined)
    for p in paragraphs:
        units += [(p, "\n\n")] if len(p) <= size else [(s, " ") for s in re.split(r"(?<=[.!?])\s+", p) if s]
    out: list[str] = []
    for u, sep in units:
        if out and len(out[-1]) + len(sep) + len(u) <= size:
            out[-1] += sep + u
        else:
            out.append(u)
    return out


def chunk_documents(documents: Iterable[Any], chunk_size: int = 1000) -> list[Context]:
    """Chunks of ``documents`` (anything :func:`document_text` reads): a document of at most
    ``chunk_size`` characters is one chunk with the document's id (``doc-N`` when it has none;
    ``<id>@2``, ``<id>@3`` for later documents with the same id, such as the pages of one file);
    a longer one is cut at paragraphs / sentences into chunks ``<id>#1``, ``<id>#2``, ...
    Metadata: ``document`` (the document id) and the document's own metadata."""
    chunks: list[Context] = []
    seen: set[str] = set()
    used: dict[str, int] = {}
    for n, doc in enumerate(documents, 1):
        text = document_text(doc).strip()
        if not text:
            continue
        doc_id = document_id(doc) or f"doc-{n}"
        used[doc_id] = used.get(doc_id, 0) + 1
        if used[doc_id] > 1:  # e.g. pages of one file sharing metadata["source"]
            doc_id = f"{doc_id}@{used[doc_id]}"
        meta = doc.get("metadata") if isinstance(doc, dict) else getattr(_node(doc), "metadata", None)
        meta = {**(meta if isinstance(meta, dict) else {}), "document": doc_id}
        pieces = [text] if len(text) <= chunk_size else _pieces(text, chunk_size)
        for i, piece in enumerate(pieces, 1):
            cid = doc_id if len(pieces) == 1 else f"{doc_id}#{i}"
            if cid in seen:
                raise ValueError(f"two chunks would have the id {cid!r}; give each document its own id")
            seen.add(cid)
            chunks.append(Context(piece, id=cid, rank=len(chunks) + 1, metadata=dict(meta)))
    return chunks
