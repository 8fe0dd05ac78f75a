"""Answerers: who replies yes / no to the player's questions.

Two implementations behind one interface, :class:`Answerer` (``await answerer(word, question)``):

- :class:`KBAnswerer`: deterministic and fast, from TurnGym's table of words × attributes, with
  question understanding by keyword / synonym matching (:func:`understand`). Questions naming a
  word ("Is it a dog?", "Is it a cat or a dog?") are answered by identity. A question it does not
  understand gets :attr:`Answer.UNKNOWN` ("I can't answer that."), counted by the env.
- :class:`LLMAnswerer`: any ``MessageCompleter`` (the embedded model locally, a Tinker model on
  the cloud) sees the secret word and the question; its reply is parsed to yes / no
  (:func:`parse_yes_no`), and anything else becomes the configured fallback, counted.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.twenty_questions._kb import Attribute, KnowledgeBase, default_kb
from envs.twenty_questions._text import ARTICLES, plural_forms, stem, tokens


class Answer(StrEnum):
    """The answerer's verdict on a question."""

    YES = "yes"
    """The answer is yes."""
    NO = "no"
    """The answer is no."""
    UNKNOWN = "unknown"
    """The answerer cannot answer (shown to the player as "I can't answer that.")."""


WRONG_GUESS = "No, it is not {guess}."
"""The reply to a wrong guess."""

ANSWER_TEXT: dict[Answer, str] = {
    Answer.YES: "Yes.",
    Answer.NO: "No.",
    Answer.UNKNOWN: "I can't answer that.",
}
"""What the player is shown for each :class:`Answer`."""


@dataclass(frozen=True)
class AnswerResult:
    """One answer, with what it took to get it."""

    answer: Answer
    """The verdict."""
    fallback: bool = False
    """True when an LLM reply could not be parsed and the fallback answer was used."""
    raw: str = ""
    """The answerer's raw reply (LLM) or the concepts it matched (KB), for transcripts."""

    @property
    def text(self) -> str:
        """The reply shown to the player."""
        return ANSWER_TEXT[self.answer]


class Answerer(ABC):
    """Answers a yes/no question about a secret word. Implementations must pickle."""

    @abstractmethod
    async def __call__(self, word: str, question: str) -> AnswerResult:
        """Answer ``question`` about the secret ``word``."""


# --- question understanding for the knowledge base ----------------------------------------

A = Attribute

# phrase -> attribute; a leading "!" marks a phrase meaning the attribute is False.
_LEXICON: dict[Attribute, tuple[str, ...]] = {
    A.LIVING: (
        "alive",
        "living",
        "live thing",
        "organism",
        "life form",
        "!non living",
        "!dead",
        "!inanimate",
        "!object",
        "!thing that isn't alive",
    ),
    A.ANIMAL: ("animal", "creature", "beast", "critter"),
    A.MAMMAL: ("mammal",),
    A.BIRD: ("bird",),
    A.FISH: ("fish",),
    A.INSECT: ("insect", "bug"),
    A.REPTILE: ("reptile",),
    A.PLANT: ("plant",),
    A.FOOD: (
        "food",
        "edible",
        "eat it",
        "eat this",
        "can you eat",
        "can i eat",
        "can we eat",
        "can people eat",
        "you eat",
        "we eat",
        "people eat",
        "i eat",
        "humans eat",
        "to eat",
        "eaten",
        "can eat",
        "could eat",
        "eatable",
        "snack",
        "meal",
        "dish",
        "dessert",
    ),
    A.FRUIT: ("fruit",),
    A.VEGETABLE: ("vegetable", "veggie", "veg"),
    A.DRINK: ("drink", "beverage", "drinkable"),
    A.MAN_MADE: (
        "man made",
        "manmade",
        "human made",
        "artificial",
        "manufactured",
        "made by people",
        "made by human",
        "made by man",
        "synthetic",
        "!natural",
        "!nature",
        "!occur naturally",
    ),
    A.ELECTRONIC: (
        "electronic",
        "electric",
        "electrical",
        "electricity",
        "battery",
        "plug",
        "plugged",
        "gadget",
        "appliance",
        "device",
        "power outlet",
    ),
    A.VEHICLE: (
        "vehicle",
        "transport",
        "transportation",
        "drive it",
        "can you drive",
        "you drive",
        "mode of travel",
    ),
    A.FURNITURE: ("furniture",),
    A.TOOL: ("tool",),
    A.CLOTHING: ("wear", "wearable", "worn", "clothing", "clothe", "garment", "apparel", "outfit"),
    A.INSTRUMENT: ("musical", "instrument", "play music", "make music"),
    A.TOY: ("toy", "sport", "game", "play with", "plaything"),
    A.CONTAINER: ("container", "hold thing", "store thing", "put thing in", "carry thing", "hold other"),
    A.BUILDING: ("building", "structure", "live in it", "can you enter"),
    A.KITCHEN: ("kitchen",),
    A.INDOORS: (
        "indoor",
        "inside",
        "in a house",
        "in the house",
        "in house",
        "in a home",
        "in the home",
        "at home",
        "household",
        "in a room",
        "!outdoor",
        "!outside",
    ),
    A.BIG: ("big", "large", "huge", "giant", "enormous", "massive", "!small", "!tiny", "!little"),
    A.HANDHELD: (
        "hold it in",
        "in your hand",
        "in one hand",
        "in my hand",
        "handheld",
        "hand held",
        "hold it with",
        "carry it in",
        "pick it up",
        "pick up",
        "fit in your pocket",
        "fit in a pocket",
    ),
    A.METAL: ("metal", "metallic", "steel", "iron", "aluminum", "aluminium"),
    A.WOOD: ("wood", "wooden", "timber"),
    A.PLASTIC: ("plastic",),
    A.FABRIC: ("fabric", "cloth", "cotton", "wool", "leather", "textile"),
    A.CAN_FLY: ("fly", "flying", "flie", "airborne"),
    A.IN_WATER: ("water", "aquatic", "swim", "sea", "ocean", "underwater", "marine", "float"),
    A.LEGS: ("leg",),
    A.FOUR_LEGS: ("four leg", "4 leg", "four feet", "4 feet", "four limb", "quadruped"),
    A.FUR: ("fur", "furry", "hair", "hairy", "fluffy"),
    A.FEATHERS: ("feather", "feathered"),
    A.WINGS: ("wing", "winged"),
    A.WHEELS: ("wheel",),
    A.ENGINE: ("engine", "motor", "fuel", "gasoline", "petrol", "gas"),
    A.SCREEN: ("screen", "display", "monitor"),
    A.PET: ("pet", "domestic", "domesticated"),
    A.FARM: ("farm",),
    A.DANGEROUS: (
        "dangerous",
        "danger",
        "harmful",
        "deadly",
        "hurt you",
        "hurt people",
        "kill",
        "!safe",
        "!harmless",
    ),
    A.SWEET: ("sweet", "sugary", "sugar"),
    A.GROWS_ON_TREES: (
        "grow on tree",
        "grow on a tree",
        "grow on the tree",
        "from a tree",
        "from tree",
        "on a tree",
        "on tree",
    ),
    A.ROUND: ("round", "sphere", "spherical", "circular", "circle", "ball shaped"),
    A.SHARP: ("sharp", "spiky", "pointy", "prickly", "blade"),
    A.WRITING: ("write", "writing", "draw", "drawing"),
    A.IN_SKY: ("sky", "in the air", "space", "celestial"),
    A.LIQUID: ("liquid", "fluid", "pour"),
    A.STRIPES: ("stripe", "striped", "stripy"),
    A.RED: ("red",),
    A.YELLOW: ("yellow",),
    A.GREEN: ("green",),
    A.WHITE: ("white",),
    A.BROWN: ("brown",),
}

_SIZE_REFERENCES = frozenset({"microwave", "breadbox", "bread box", "microwave oven", "toaster oven"})
_COMPARE_RE = re.compile(
    r"\b(bigger|larger|smaller|greater|heavier|lighter|taller|shorter|wider)\s+than\s+"
    r"(?:an?\s+|the\s+|your\s+|my\s+)?([a-z]+(?:\s+[a-z]+)?)"
)
_NEGATION = frozenset({"not", "never"})


@dataclass(frozen=True)
class Concept:
    """One thing a question asks about: an attribute (possibly negated) or a word's identity."""

    attribute: Attribute | None = None
    """The attribute asked about, or None for an identity question."""
    word: str | None = None
    """The KB word named ("Is it a dog?"), for an identity question."""
    negated: bool = False
    """The question asks whether the attribute is False ("Is it natural?" -> not man-made)."""

    def holds(self, kb: KnowledgeBase, secret: str) -> bool:
        """Whether this concept is true of the secret word."""
        if self.attribute is None:
            return self.word == secret
        return kb.has(secret, self.attribute) != self.negated


@dataclass(frozen=True)
class Understanding:
    """What :func:`understand` made of a question."""

    concepts: tuple[Concept, ...]
    """Matched concepts, in order; empty when the question was not understood."""
    disjunction: bool = False
    """Combine with OR ("Is it a cat or a dog?") instead of AND ("a living thing that flies")."""
    negated: bool = False
    """The whole question is negated by a standalone "not" ("Is it not an animal?")."""
    unknown_reason: str = ""
    """Why the question could not be answered (empty when understood)."""

    def evaluate(self, kb: KnowledgeBase, secret: str) -> Answer:
        """The answer for ``secret`` (:attr:`Answer.UNKNOWN` when not understood)."""
        if not self.concepts:
            return Answer.UNKNOWN
        values = [c.holds(kb, secret) for c in self.concepts]
        value = any(values) if self.disjunction else all(values)
        return Answer.YES if value != self.negated else Answer.NO


def _phrase_index() -> list[tuple[tuple[str, ...], Attribute, bool]]:
    entries = []
    for attribute, phrases in _LEXICON.items():
        for phrase in phrases:
            negated = phrase.startswith("!")
            entries.append((tuple(stem(t) for t in tokens(phrase.lstrip("!"))), attribute, negated))
    entries.sort(key=lambda e: -len(e[0]))  # longest phrase first
    return entries


_PHRASES = _phrase_index()


def understand(question: str, kb: KnowledgeBase | None = None) -> Understanding:
    """Map a yes/no question to concepts by keyword / synonym matching.

    Rules: a comparison "bigger/smaller than X" is understood only against a microwave (or a
    bread box); a question that is just "Is it (a) <word>?" is an identity question; otherwise
    attribute phrases (longest first) and then KB words are matched anywhere. "or" combines the
    concepts with OR, else AND; a standalone "not" negates the answer.
    """
    kb = kb or default_kb()
    text = question.lower().replace("’", "'")
    text = re.sub(r"\b(?:yes\s+or\s+no|true\s+or\s+false)\b", " ", text)
    concepts: list[Concept] = []

    for match in _COMPARE_RE.finditer(text):
        relation, target = match.group(1), match.group(2)
        target_words = target.split()
        reference = next(
            (r for r in (target, target_words[0]) if r in _SIZE_REFERENCES or stem(r) in _SIZE_REFERENCES),
            None,
        )
        if reference is None or relation not in ("bigger", "larger", "smaller", "greater"):
            return Understanding((), unknown_reason=f"comparison with {target!r}")
        concepts.append(Concept(attribute=A.BIG, negated=relation == "smaller"))
        text = text[: match.start()] + " " * (match.end() - match.start()) + text[match.end() :]

    words = [stem(t) for t in tokens(text)]
    # identity: "is it (a|an|the) <word>" and nothing else
    core = [w for w in words if w not in ARTICLES]
    if not concepts and len(core) == 3 and core[:2] == ["is", "it"]:
        named = _kb_word(kb, core[2])
        if named is not None:
            return Understanding((Concept(word=named),))

    used = [False] * len(words)
    found: list[tuple[int, Concept]] = []
    for phrase, attribute, negated in _PHRASES:
        n = len(phrase)
        for i in range(len(words) - n + 1):
            if tuple(words[i : i + n]) == phrase and not any(used[i : i + n]):
                found.append((i, Concept(attribute=attribute, negated=negated)))
                for j in range(i, i + n):
                    used[j] = True
    for i, w in enumerate(words):
        if not used[i]:
            named = _kb_word(kb, w)
            if named is not None:
                found.append((i, Concept(word=named)))
                used[i] = True
    found.sort(key=lambda f: f[0])
    concepts += [c for _, c in found]
    # de-duplicate while keeping order
    unique: list[Concept] = []
    for c in concepts:
        if c not in unique:
            unique.append(c)
    if not unique:
        return Understanding((), unknown_reason="no known attribute or word")
    disjunction = "or" in words
    negated = any(w in _NEGATION for w in words)
    return Understanding(tuple(unique), disjunction=disjunction, negated=negated)


@functools.lru_cache(maxsize=8)
def _word_index(kb: KnowledgeBase) -> dict[str, str]:
    """Stemmed name -> KB word, for words and synonyms (exact names win over stems)."""
    index: dict[str, str] = {}
    for alias, word in kb.synonyms.items():
        index.setdefault(stem(alias), word)
    for word in kb.table:
        for plural in plural_forms(word):
            index.setdefault(stem(plural), word)
    for word in kb.table:
        index[stem(word)] = word
    for alias, word in kb.synonyms.items():
        index[alias] = word
    for word in kb.table:
        index[word] = word
    return index


def _kb_word(kb: KnowledgeBase, token: str) -> str | None:
    return _word_index(kb).get(token)


@dataclass(frozen=True)
class KBAnswerer(Answerer):
    """Deterministic answerer from the knowledge base; unknown words or questions give UNKNOWN."""

    kb: KnowledgeBase = field(default_factory=default_kb)
    """The table of words × attributes."""

    async def __call__(self, word: str, question: str) -> AnswerResult:
        return self.answer(word, question)

    def answer(self, word: str, question: str) -> AnswerResult:
        """Synchronous :meth:`__call__`."""
        if word not in self.kb.table:
            return AnswerResult(Answer.UNKNOWN, raw=f"word {word!r} not in the knowledge base")
        understanding = understand(question, self.kb)
        raw = understanding.unknown_reason or ", ".join(
            (f"not {c.attribute}" if c.negated else str(c.attribute)) if c.attribute else f"={c.word}"
            for c in understanding.concepts
        )
        return AnswerResult(understanding.evaluate(self.kb, word), raw=raw)


ANSWERER_PROMPT = (
    "We are playing twenty questions. The secret word is {word}. {question} Answer only yes or no."
)
"""The one user message :class:`LLMAnswerer` sends (``{word}``: the secret, ``{question}``: the
question). One user message rather than a system prompt: SmolLM2-135M answers it right about
70% of the time (greedy) against 50% with the rules in a system prompt."""

_YES = frozenset({"yes", "yeah", "yep", "yup", "correct", "true", "affirmative"})
_NO = frozenset({"no", "nope", "nah", "false", "incorrect", "negative"})


def parse_yes_no(reply: str) -> Answer | None:
    """The first yes-like or no-like word of a reply (``"Yes, it is."`` -> YES), else None."""
    for token in tokens(reply):
        if token in _YES:
            return Answer.YES
        if token in _NO:
            return Answer.NO
    return None


@dataclass(frozen=True)
class LLMAnswerer(Answerer):
    """An LLM (any ``MessageCompleter``) answers; unparseable replies become ``fallback``, counted.

    The completer sees one user message with the secret word and the question (each question
    independently, like the cookbook's recipe). Pickles when the completer does.
    """

    completer: MessageCompleter
    """The model that answers (e.g. ``TinkerMessageCompleter`` or a local one)."""
    fallback: Answer = Answer.UNKNOWN
    """The answer used when the reply contains neither yes nor no."""
    prompt: str = ANSWERER_PROMPT
    """The user message template (placeholders ``{word}`` and ``{question}``)."""

    def __post_init__(self) -> None:
        try:
            self.prompt.format(word="w", question="q")
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"LLMAnswerer prompt must use only {{word}} and {{question}}: {e}") from None
        if self.fallback not in Answer:
            raise ValueError(f"fallback must be an Answer, got {self.fallback!r}")

    async def __call__(self, word: str, question: str) -> AnswerResult:
        messages: list[Message] = [
            {"role": "user", "content": self.prompt.format(word=word, question=question)}
        ]
        reply = get_text_content(await self.completer(messages))
        parsed = parse_yes_no(reply)
        if parsed is None:
            return AnswerResult(self.fallback, fallback=True, raw=reply)
        return AnswerResult(parsed, raw=reply)
