"""Text handling shared by the env and the answerers: tokens, plural stems, guesses, turn kinds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

_IRREGULAR = {
    "mice": "mouse",
    "geese": "goose",
    "teeth": "tooth",
    "feet": "foot",
    "people": "person",
    "children": "child",
    "men": "man",
    "women": "woman",
    "oxen": "ox",
    "buses": "bus",
    "cacti": "cactus",
    "octopi": "octopus",
    "octopuses": "octopus",
    "knives": "knife",
    "wolves": "wolf",
    "leaves": "leaf",
    "shelves": "shelf",
    "loaves": "loaf",
    "lives": "live",
    "halves": "half",
    "scarves": "scarf",
    "calves": "calf",
    "hooves": "hoof",
    "radios": "radio",
    "pianos": "piano",
    "volcanoes": "volcano",
}
_KEEP = {
    "bus",
    "gas",
    "glass",
    "grass",
    "dress",
    "cactus",
    "octopus",
    "this",
    "is",
    "has",
    "was",
    "does",
    "yes",
}

ARTICLES = frozenset({"a", "an", "the", "some", "my"})


def stem(token: str) -> str:
    """Lower-case a word and strip a plural / third-person ``s`` (``"Flies"`` -> ``"fly"``)."""
    t = token.lower()
    if t in _IRREGULAR:
        return _IRREGULAR[t]
    if t in _KEEP or len(t) <= 3:
        return t
    if t.endswith("ies") and len(t) > 4:
        return t[:-3] + "y"
    if t.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return t[:-2]
    if t.endswith("s") and not t.endswith(("ss", "us", "is")):
        return t[:-1]
    return t


_WORD_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")


def tokens(text: str) -> list[str]:
    """Lower-case word tokens of ``text`` (hyphens split words; apostrophes stay inside)."""
    return _WORD_RE.findall(text.lower().replace("’", "'"))


def plural_forms(word: str) -> set[str]:
    """Likely plural spellings of a singular noun (``axe`` -> ``axes``, ``knife`` -> ``knives``...)."""
    w = word.lower()
    forms = {w + "s", w + "es"}
    if w.endswith("y"):
        forms.add(w[:-1] + "ies")
    if w.endswith("f"):
        forms.add(w[:-1] + "ves")
    if w.endswith("fe"):
        forms.add(w[:-2] + "ves")
    forms.update(plural for plural, singular in _IRREGULAR.items() if singular == w)
    return forms


def same_word(a: str, b: str) -> bool:
    """Whether two words are the same up to case and a plural ending (``"Dogs"`` ~ ``"dog"``)."""
    a, b = a.lower(), b.lower()
    return a == b or stem(a) == stem(b) or a in plural_forms(b) or b in plural_forms(a)


# "Guess:" then optional decoration (markdown, quotes, brackets) before the word.
_GUESS_RE = re.compile(
    r"guess\s*:[\s*_`'\"<\[(]*([A-Za-z][A-Za-z'\-]*(?:\s+[A-Za-z][A-Za-z'\-]*)*)?", re.IGNORECASE
)
_FILLERS = ("it's", "it", "is", "that", "its")


def parse_guess(text: str) -> str | None:
    """The first guessed word in ``text``, lower-cased and without article, or None.

    ``Guess: <word>`` may appear anywhere, in any case, with an article (``Guess: a dog``) or
    decoration (``**Guess:** `dog```). Only the first ``Guess:`` counts, and of a line naming
    several words (``Guess: dog, cat``) only the first word. Returns ``""`` for a ``Guess:`` with
    no word after it (a guess, but an empty one).
    """
    match = _GUESS_RE.search(text)
    if match is None:
        return None
    words = tokens(match.group(1) or "")
    while words and (words[0] in ARTICLES or words[0] in _FILLERS):
        words = words[1:]
    return words[0] if words else ""


_QUESTION_START = frozenset(
    [
        "is",
        "are",
        "am",
        "was",
        "were",
        "does",
        "do",
        "did",
        "can",
        "could",
        "would",
        "will",
        "should",
        "has",
        "have",
        "had",
        "may",
        "might",
        "isn't",
        "aren't",
        "doesn't",
        "don't",
        "can't",
        "wasn't",
        "won't",
    ]
)


class TurnKind(StrEnum):
    """What one player message is."""

    QUESTION = "question"
    """Exactly one question (one ``?``, or none but starting like a question)."""
    GUESS = "guess"
    """Contains ``Guess: <word>`` (the first guess counts)."""
    INVALID = "invalid"
    """Neither one question nor a guess: a format violation."""


@dataclass(frozen=True)
class ParsedTurn:
    """A player message, classified."""

    kind: TurnKind
    """Question, guess or invalid."""
    text: str
    """The question text (stripped), or the guessed word, or the raw text."""


def classify_turn(text: str) -> ParsedTurn:
    """Classify a player message: a guess anywhere wins; else one question; else invalid."""
    guess = parse_guess(text)
    if guess is not None:
        return ParsedTurn(TurnKind.GUESS, guess) if guess else ParsedTurn(TurnKind.INVALID, text)
    stripped = text.strip()
    marks = len(re.findall(r"\?+", stripped))
    if marks == 1:
        return ParsedTurn(TurnKind.QUESTION, stripped)
    words = tokens(stripped)
    if marks == 0 and len(words) >= 2 and words[0] in _QUESTION_START and "\n" not in stripped:
        return ParsedTurn(TurnKind.QUESTION, stripped)
    return ParsedTurn(TurnKind.INVALID, stripped)
