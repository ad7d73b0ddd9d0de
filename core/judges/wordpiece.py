"""Internal: BERT uncased WordPiece tokenisation in pure Python: the tokenizer of all-MiniLM-L6-v2.

It gives the token ids that the ``tokenizers`` library gives with the model's ``tokenizer.json``
(BertNormalizer with clean_text, handle_chinese_chars, lowercase and accent stripping;
BertPreTokenizer; WordPiece with ``##`` continuations and at most 100 characters per word; the
``[CLS] ... [SEP]`` template), from a plain ``vocab.txt`` (one token per line, its id the line
number). The special tokens (``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]``, ``[MASK]``) written in a text
are matched before normalisation, as ``tokenizers`` does.

Steps, as BERT defines them:

1. clean: drop NUL, U+FFFD, control, format and private-use characters (categories Cc, Cf, Co)
   except tab, newline and carriage return; turn whitespace (tab, newline, CR, categories Zs, Zl,
   Zp) into spaces;
2. put spaces around CJK ideographs (so each is a word);
3. strip accents (NFD, then drop non-spacing marks, category Mn) and lower-case character by
   character;
4. split on spaces, and make each punctuation character (ASCII punctuation or category P*) a word;
5. WordPiece: greedy longest match from the left, continuations looked up as ``##piece``; a word
   with a piece that is not in the vocabulary, or longer than 100 characters, is one ``[UNK]``.

Checked against ``tokenizers`` 0.23: the same ids on every text of the bundled samples, on tricky
strings, and on every Unicode code point (alone and between letters) except 503 of 1.1 million,
characters of rare scripts whose Unicode properties differ between Python's ``unicodedata``
(Unicode 14 in Python 3.11) and the older tables ``tokenizers`` was built with.
"""

from __future__ import annotations

import os
import re
import string
import unicodedata
from pathlib import Path

__all__ = ["WordPiece", "normalize", "pre_tokenize"]

_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: ASCII: drop the control characters except tab/newline/CR (which become spaces).
_ASCII_CLEAN = {c: None for c in [*range(32), 127] if chr(c) not in "\t\n\r"} | {
    ord("\t"): " ",
    ord("\n"): " ",
    ord("\r"): " ",
}
_ASCII_WORDS = re.compile("[^%s]+|[%s]" % ((re.escape(string.punctuation),) * 2))
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)  # the ranges of `tokenizers`' BertNormalizer


def _is_cjk(code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in _CJK)


def normalize(text: str) -> str:
    """BERT uncased normalisation of ``text``: clean, space out CJK ideographs, strip accents, lower-case."""
    if text.isascii():
        return text.translate(_ASCII_CLEAN).lower()
    out = []
    for c in text:
        code = ord(c)
        cat = unicodedata.category(c)
        if c in "\t\n\r" or cat in ("Zs", "Zl", "Zp"):
            out.append(" ")
        elif code == 0xFFFD or cat in ("Cc", "Cf", "Co", "Cs"):  # unassigned code points (Cn) stay
            continue
        elif code >= 0x3400 and _is_cjk(code):
            out.append(f" {c} ")
        else:
            out.append(c)
    text = "".join(c for c in unicodedata.normalize("NFD", "".join(out)) if unicodedata.category(c) != "Mn")
    # per character, as `tokenizers` does: str.lower() would turn a word-final capital sigma into "ς"
    return "".join(c.lower() for c in text) if "\u03a3" in text else text.lower()


def pre_tokenize(text: str) -> list[str]:
    """Words of normalised ``text``: split on whitespace, each punctuation character its own word."""
    words: list[str] = []
    for chunk in text.split():
        if chunk.isascii():
            words += [chunk] if chunk.isalnum() else _ASCII_WORDS.findall(chunk)
            continue
        start = 0
        for i, c in enumerate(chunk):
            if c in string.punctuation or unicodedata.category(c)[0] == "P":
                if i > start:
                    words.append(chunk[start:i])
                words.append(c)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


class WordPiece:
    """BERT uncased WordPiece tokenizer over ``vocab_file``; ``encode(text)`` -> token ids.

    ``max_length``: the longest encoding, ``[CLS]`` and ``[SEP]`` included (longer texts are cut).
    ``max_word_chars``: longer words are ``[UNK]``.
    """

    def __init__(self, vocab_file: str | os.PathLike, *, max_length: int = 512, max_word_chars: int = 100):
        tokens = Path(vocab_file).read_text(encoding="utf-8").split("\n")  # not splitlines(): tokens may hold U+2028
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.vocab = {token: i for i, token in enumerate(tokens)}
        missing = [t for t in _SPECIAL if t not in self.vocab]
        if missing:
            raise ValueError(f"{vocab_file}: not a BERT vocabulary (no {', '.join(missing)})")
        self.unk, self.cls, self.sep = self.vocab["[UNK]"], self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.max_length = int(max_length)
        self.max_word_chars = int(max_word_chars)
        self._special = re.compile("(" + "|".join(map(re.escape, _SPECIAL)) + ")")
        self._cache: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """``[CLS]``, the ids of ``text``'s pieces (cut to ``max_length - 2``), ``[SEP]``."""
        return [self.cls, *self.tokenize(text, self.max_length - 2), self.sep]

    def tokenize(self, text: str, limit: int | None = None) -> list[int]:
        """The ids of ``text``'s word pieces (no ``[CLS]``/``[SEP]``), at most ``limit`` of them."""
        ids: list[int] = []
        parts = self._special.split(text) if "[" in text else [text]
        for k, part in enumerate(parts):
            if k % 2:  # a special token written in the text
                ids.append(self.vocab[part])
            else:
                for word in pre_tokenize(normalize(part)):
                    ids += self._word(word)
                    if limit is not None and len(ids) >= limit:
                        return ids[:limit]
        return ids[:limit]

    def _word(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            ids = self._pieces(word)
            if len(self._cache) < 200_000:
                self._cache[word] = ids
        return ids

    def _pieces(self, word: str) -> list[int]:
        if len(word) > self.max_word_chars:
            return [self.unk]
        vocab = self.vocab
        ids, start, n = [], 0, len(word)
        while start < n:
            end = n
            while end > start:
                piece = vocab.get(word[start:end] if start == 0 else "##" + word[start:end])
                if piece is not None:
                    break
                end -= 1
            else:
                return [self.unk]
            ids.append(piece)
            start = end
        return ids
