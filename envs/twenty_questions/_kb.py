"""The knowledge base: our own table of words × attributes (every cell defined).

The table is written compactly: each word belongs to a *kind* whose default attributes it
inherits, then adds (``+attr``) or removes (``-attr``) attributes. The resolved table is total:
for every word and every :class:`Attribute` it says True or False. Attribute meanings are the
docstrings below; they are deliberately "typical" judgements (a dog is usually found indoors,
a fruit is not a *living thing*), chosen once and applied consistently.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class Attribute(StrEnum):
    """A yes/no property of a word; its value is the key used in the table."""

    LIVING = "living"
    """A living organism (animals and plants; foods, fruits and vegetables are not)."""
    ANIMAL = "animal"
    """An animal (including birds, fish, insects, spiders, worms)."""
    MAMMAL = "mammal"
    """A mammal."""
    BIRD = "bird"
    """A bird."""
    FISH = "fish"
    """A fish (not whales, octopuses, crabs or jellyfish)."""
    INSECT = "insect"
    """An insect (not spiders, worms or snails)."""
    REPTILE = "reptile"
    """A reptile (not frogs)."""
    PLANT = "plant"
    """A plant (a whole plant: fruits and vegetables are not)."""
    FOOD = "food"
    """Something people eat (prepared or raw food; not drinks, not live animals)."""
    FRUIT = "fruit"
    """A fruit, in the kitchen sense."""
    VEGETABLE = "vegetable"
    """A vegetable, in the kitchen sense."""
    DRINK = "drink"
    """Something people drink."""
    MAN_MADE = "man_made"
    """Made by people (not found in nature)."""
    ELECTRONIC = "electronic"
    """Uses electricity (plugged in or on batteries)."""
    VEHICLE = "vehicle"
    """A vehicle that carries people or goods."""
    FURNITURE = "furniture"
    """A piece of furniture."""
    TOOL = "tool"
    """A hand tool."""
    CLOTHING = "clothing"
    """Something you wear."""
    INSTRUMENT = "instrument"
    """A musical instrument."""
    TOY = "toy"
    """A toy, or equipment for games and sports."""
    CONTAINER = "container"
    """Made to hold or carry other things."""
    BUILDING = "building"
    """A building or large man-made structure."""
    KITCHEN = "kitchen"
    """Usually found in a kitchen (food, drinks, kitchenware, kitchen appliances)."""
    INDOORS = "indoors"
    """Usually found indoors, inside a home or building."""
    BIG = "big"
    """Bigger than a microwave oven."""
    HANDHELD = "handheld"
    """Small and light enough to hold in one hand."""
    METAL = "metal"
    """Made mostly of metal."""
    WOOD = "wood"
    """Made mostly of wood."""
    PLASTIC = "plastic"
    """Made mostly of plastic."""
    FABRIC = "fabric"
    """Made mostly of cloth, fabric, wool or leather."""
    CAN_FLY = "can_fly"
    """Can fly (or float up in the air)."""
    IN_WATER = "in_water"
    """Lives in, travels on, or is water."""
    LEGS = "legs"
    """Has legs."""
    FOUR_LEGS = "four_legs"
    """Has exactly four legs."""
    FUR = "fur"
    """Has fur or hair."""
    FEATHERS = "feathers"
    """Has feathers."""
    WINGS = "wings"
    """Has wings."""
    WHEELS = "wheels"
    """Has wheels."""
    ENGINE = "engine"
    """Has an engine or motor that moves it."""
    SCREEN = "screen"
    """Has a screen or display."""
    PET = "pet"
    """Commonly kept as a pet."""
    FARM = "farm"
    """Commonly found on a farm (farm animals, tractors, barns)."""
    DANGEROUS = "dangerous"
    """Can seriously hurt a person."""
    SWEET = "sweet"
    """Tastes sweet."""
    GROWS_ON_TREES = "grows_on_trees"
    """Grows on trees."""
    ROUND = "round"
    """Round (a ball or disc shape)."""
    SHARP = "sharp"
    """Sharp or spiky."""
    WRITING = "writing"
    """Used for writing or drawing (with, or on)."""
    IN_SKY = "in_sky"
    """Found in the sky (sun, moon, clouds, aircraft, flying birds, kites, balloons)."""
    LIQUID = "liquid"
    """A liquid (drinks, soup, honey, rivers, oceans)."""
    STRIPES = "stripes"
    """Has stripes."""
    RED = "red"
    """Typically red (things that come in any colour are not)."""
    YELLOW = "yellow"
    """Typically yellow (things that come in any colour are not)."""
    GREEN = "green"
    """Typically green (things that come in any colour are not)."""
    WHITE = "white"
    """Typically white (things that come in any colour are not)."""
    BROWN = "brown"
    """Typically brown (things that come in any colour are not)."""


A = Attribute

QUESTIONS: dict[Attribute, str] = {
    A.LIVING: "Is it a living thing?",
    A.ANIMAL: "Is it an animal?",
    A.MAMMAL: "Is it a mammal?",
    A.BIRD: "Is it a bird?",
    A.FISH: "Is it a fish?",
    A.INSECT: "Is it an insect?",
    A.REPTILE: "Is it a reptile?",
    A.PLANT: "Is it a plant?",
    A.FOOD: "Is it food?",
    A.FRUIT: "Is it a fruit?",
    A.VEGETABLE: "Is it a vegetable?",
    A.DRINK: "Is it a drink?",
    A.MAN_MADE: "Is it man-made?",
    A.ELECTRONIC: "Is it electronic?",
    A.VEHICLE: "Is it a vehicle?",
    A.FURNITURE: "Is it furniture?",
    A.TOOL: "Is it a tool?",
    A.CLOTHING: "Is it something you wear?",
    A.INSTRUMENT: "Is it a musical instrument?",
    A.TOY: "Is it a toy or used in sports?",
    A.CONTAINER: "Is it a container?",
    A.BUILDING: "Is it a building?",
    A.KITCHEN: "Is it found in a kitchen?",
    A.INDOORS: "Is it usually found indoors?",
    A.BIG: "Is it bigger than a microwave?",
    A.HANDHELD: "Can you hold it in one hand?",
    A.METAL: "Is it made of metal?",
    A.WOOD: "Is it made of wood?",
    A.PLASTIC: "Is it made of plastic?",
    A.FABRIC: "Is it made of fabric?",
    A.CAN_FLY: "Can it fly?",
    A.IN_WATER: "Does it live in water?",
    A.LEGS: "Does it have legs?",
    A.FOUR_LEGS: "Does it have four legs?",
    A.FUR: "Does it have fur?",
    A.FEATHERS: "Does it have feathers?",
    A.WINGS: "Does it have wings?",
    A.WHEELS: "Does it have wheels?",
    A.ENGINE: "Does it have an engine?",
    A.SCREEN: "Does it have a screen?",
    A.PET: "Is it a pet?",
    A.FARM: "Is it found on a farm?",
    A.DANGEROUS: "Is it dangerous?",
    A.SWEET: "Is it sweet?",
    A.GROWS_ON_TREES: "Does it grow on trees?",
    A.ROUND: "Is it round?",
    A.SHARP: "Is it sharp?",
    A.WRITING: "Is it used for writing?",
    A.IN_SKY: "Is it found in the sky?",
    A.LIQUID: "Is it a liquid?",
    A.STRIPES: "Does it have stripes?",
    A.RED: "Is it red?",
    A.YELLOW: "Is it yellow?",
    A.GREEN: "Is it green?",
    A.WHITE: "Is it white?",
    A.BROWN: "Is it brown?",
}
"""The canonical yes/no question of each attribute (used by scripted players)."""

_KINDS: dict[str, str] = {
    "mammal": "living animal mammal legs four_legs fur",
    "bird": "living animal bird legs feathers wings can_fly in_sky",
    "fish": "living animal fish in_water",
    "sea": "living animal in_water",
    "reptile": "living animal reptile legs four_legs",
    "amphibian": "living animal legs four_legs in_water handheld",
    "insect": "living animal insect legs wings can_fly handheld",
    "bug": "living animal legs handheld",
    "plant": "living plant",
    "fruit": "food fruit kitchen indoors handheld sweet round",
    "vegetable": "food vegetable kitchen indoors handheld",
    "dish": "food kitchen indoors handheld man_made",
    "drink": "drink kitchen indoors man_made",
    "kitchenware": "man_made kitchen indoors handheld",
    "appliance": "man_made electronic indoors",
    "furniture": "man_made furniture indoors big wood legs four_legs",
    "vehicle": "man_made vehicle big metal wheels engine",
    "tool": "man_made tool handheld metal",
    "clothing": "man_made clothing fabric indoors handheld",
    "instrument": "man_made instrument indoors",
    "toy": "man_made toy",
    "household": "man_made indoors",
    "nature": "",
    "building": "man_made building big",
}

# word: (kind, changes). Changes are "+attr" / "-attr" tokens (a bare name means "+").
_TABLE: dict[str, tuple[str, str]] = {
    # mammals
    "dog": ("mammal", "pet indoors big"),
    "cat": ("mammal", "pet indoors"),
    "horse": ("mammal", "farm big"),
    "cow": ("mammal", "farm big"),
    "pig": ("mammal", "farm big -fur"),
    "sheep": ("mammal", "farm big"),
    "goat": ("mammal", "farm big"),
    "donkey": ("mammal", "farm big"),
    "rabbit": ("mammal", "pet"),
    "hamster": ("mammal", "pet indoors handheld"),
    "elephant": ("mammal", "big -fur"),
    "lion": ("mammal", "big dangerous"),
    "tiger": ("mammal", "big dangerous"),
    "bear": ("mammal", "big dangerous"),
    "monkey": ("mammal", "big -four_legs"),
    "giraffe": ("mammal", "big"),
    "zebra": ("mammal", "big"),
    "wolf": ("mammal", "big dangerous"),
    "fox": ("mammal", "big"),
    "deer": ("mammal", "big"),
    "whale": ("mammal", "big in_water -legs -four_legs -fur"),
    "dolphin": ("mammal", "big in_water -legs -four_legs -fur"),
    "camel": ("mammal", "big"),
    "kangaroo": ("mammal", "big -four_legs"),
    "squirrel": ("mammal", ""),
    # birds
    "chicken": ("bird", "farm -can_fly -in_sky"),
    "duck": ("bird", "farm in_water"),
    "eagle": ("bird", ""),
    "owl": ("bird", ""),
    "parrot": ("bird", "pet indoors -in_sky"),
    "penguin": ("bird", "in_water -can_fly -in_sky"),
    "pigeon": ("bird", ""),
    "swan": ("bird", "in_water big"),
    "crow": ("bird", ""),
    "ostrich": ("bird", "big -can_fly -in_sky"),
    "turkey": ("bird", "farm big -can_fly -in_sky"),
    "goose": ("bird", "farm in_water big"),
    # fish and other sea animals
    "shark": ("fish", "big dangerous"),
    "salmon": ("fish", ""),
    "goldfish": ("fish", "pet indoors handheld"),
    "tuna": ("fish", "big"),
    "octopus": ("sea", ""),
    "crab": ("sea", "legs handheld"),
    "jellyfish": ("sea", ""),
    "starfish": ("sea", "handheld"),
    # reptiles and amphibians
    "snake": ("reptile", "-legs -four_legs dangerous"),
    "lizard": ("reptile", "handheld"),
    "turtle": ("reptile", "in_water"),
    "crocodile": ("reptile", "big dangerous in_water"),
    "frog": ("amphibian", ""),
    # insects and other small creatures
    "bee": ("insect", ""),
    "ant": ("insect", "-wings -can_fly"),
    "butterfly": ("insect", ""),
    "mosquito": ("insect", ""),
    "ladybug": ("insect", "round"),
    "grasshopper": ("insect", ""),
    "beetle": ("insect", ""),
    "spider": ("bug", ""),
    "worm": ("bug", "-legs"),
    "snail": ("bug", "-legs"),
    # plants
    "tree": ("plant", "big wood"),
    "flower": ("plant", "handheld"),
    "rose": ("plant", "handheld"),
    "grass": ("plant", ""),
    "cactus": ("plant", "sharp"),
    "sunflower": ("plant", "big"),
    "fern": ("plant", ""),
    "bamboo": ("plant", "big"),
    # fruits
    "apple": ("fruit", "grows_on_trees"),
    "banana": ("fruit", "grows_on_trees -round"),
    "orange": ("fruit", "grows_on_trees"),
    "grape": ("fruit", ""),
    "strawberry": ("fruit", "-round"),
    "lemon": ("fruit", "grows_on_trees -sweet"),
    "cherry": ("fruit", "grows_on_trees"),
    "pear": ("fruit", "grows_on_trees -round"),
    "peach": ("fruit", "grows_on_trees"),
    "pineapple": ("fruit", "-round"),
    "watermelon": ("fruit", "-handheld"),
    "mango": ("fruit", "grows_on_trees -round"),
    "coconut": ("fruit", "grows_on_trees -sweet"),
    "plum": ("fruit", "grows_on_trees"),
    "blueberry": ("fruit", ""),
    # vegetables
    "carrot": ("vegetable", ""),
    "potato": ("vegetable", ""),
    "onion": ("vegetable", "round"),
    "lettuce": ("vegetable", ""),
    "broccoli": ("vegetable", ""),
    "cabbage": ("vegetable", "round"),
    "corn": ("vegetable", ""),
    "cucumber": ("vegetable", ""),
    "garlic": ("vegetable", ""),
    "spinach": ("vegetable", ""),
    "celery": ("vegetable", ""),
    "pea": ("vegetable", "round"),
    # prepared food and other foods
    "bread": ("dish", ""),
    "cheese": ("dish", ""),
    "egg": ("dish", "-man_made"),
    "rice": ("dish", "-man_made"),
    "pizza": ("dish", "round"),
    "cake": ("dish", "sweet"),
    "cookie": ("dish", "sweet round"),
    "sandwich": ("dish", ""),
    "soup": ("dish", "-handheld"),
    "butter": ("dish", ""),
    "chocolate": ("dish", "sweet"),
    "honey": ("dish", "-man_made sweet"),
    "pasta": ("dish", ""),
    "salad": ("dish", ""),
    "sausage": ("dish", ""),
    "pie": ("dish", "sweet round"),
    "candy": ("dish", "sweet"),
    "popcorn": ("dish", ""),
    # drinks
    "milk": ("drink", "-man_made"),
    "coffee": ("drink", ""),
    "tea": ("drink", ""),
    "juice": ("drink", "sweet"),
    "lemonade": ("drink", "sweet"),
    "soda": ("drink", "sweet"),
    "water": ("drink", "-man_made in_water"),
    # kitchenware
    "spoon": ("kitchenware", "metal"),
    "fork": ("kitchenware", "metal"),
    "knife": ("kitchenware", "metal sharp dangerous"),
    "plate": ("kitchenware", "round"),
    "cup": ("kitchenware", "container"),
    "bowl": ("kitchenware", "container round"),
    "pan": ("kitchenware", "metal"),
    "pot": ("kitchenware", "metal container"),
    "kettle": ("kitchenware", "metal container"),
    "bottle": ("kitchenware", "container plastic"),
    "jar": ("kitchenware", "container"),
    # appliances and electronics
    "refrigerator": ("appliance", "kitchen big metal"),
    "microwave": ("appliance", "kitchen metal"),
    "toaster": ("appliance", "kitchen metal"),
    "oven": ("appliance", "kitchen big metal"),
    "dishwasher": ("appliance", "kitchen big metal"),
    "television": ("appliance", "screen big"),
    "computer": ("appliance", "screen"),
    "laptop": ("appliance", "screen"),
    "phone": ("appliance", "screen handheld"),
    "radio": ("appliance", ""),
    "camera": ("appliance", "screen handheld"),
    "fan": ("appliance", ""),
    "lamp": ("appliance", ""),
    "printer": ("appliance", "plastic"),
    "calculator": ("appliance", "screen handheld plastic"),
    "headphones": ("appliance", "handheld plastic"),
    "keyboard": ("appliance", "plastic"),
    "clock": ("appliance", "round"),
    # furniture
    "chair": ("furniture", ""),
    "table": ("furniture", ""),
    "bed": ("furniture", ""),
    "sofa": ("furniture", "fabric -wood"),
    "desk": ("furniture", ""),
    "shelf": ("furniture", "-legs -four_legs"),
    "wardrobe": ("furniture", "-legs -four_legs container"),
    "bench": ("furniture", "-indoors"),
    "stool": ("furniture", ""),
    # vehicles
    "car": ("vehicle", ""),
    "bus": ("vehicle", ""),
    "train": ("vehicle", ""),
    "bicycle": ("vehicle", "-engine"),
    "motorcycle": ("vehicle", ""),
    "airplane": ("vehicle", "can_fly wings in_sky"),
    "boat": ("vehicle", "-wheels -metal in_water"),
    "ship": ("vehicle", "-wheels in_water"),
    "truck": ("vehicle", ""),
    "helicopter": ("vehicle", "-wheels can_fly in_sky"),
    "tractor": ("vehicle", "farm"),
    "rocket": ("vehicle", "-wheels can_fly in_sky dangerous"),
    "submarine": ("vehicle", "-wheels in_water"),
    # tools
    "hammer": ("tool", ""),
    "saw": ("tool", "sharp dangerous"),
    "screwdriver": ("tool", ""),
    "shovel": ("tool", "-handheld big"),
    "axe": ("tool", "sharp dangerous"),
    "wrench": ("tool", ""),
    "drill": ("tool", "electronic"),
    "ladder": ("tool", "-handheld big"),
    "scissors": ("tool", "sharp indoors"),
    "needle": ("tool", "sharp indoors"),
    "broom": ("tool", "-handheld -metal wood big indoors"),
    # clothing
    "shirt": ("clothing", ""),
    "hat": ("clothing", ""),
    "shoe": ("clothing", ""),
    "sock": ("clothing", ""),
    "jacket": ("clothing", ""),
    "dress": ("clothing", ""),
    "scarf": ("clothing", ""),
    "glove": ("clothing", ""),
    "belt": ("clothing", ""),
    "boot": ("clothing", ""),
    "coat": ("clothing", ""),
    "sweater": ("clothing", ""),
    # musical instruments
    "piano": ("instrument", "big wood"),
    "guitar": ("instrument", "wood big"),
    "drum": ("instrument", "round"),
    "violin": ("instrument", "wood handheld"),
    "trumpet": ("instrument", "metal handheld"),
    "flute": ("instrument", "metal handheld"),
    "harp": ("instrument", "big wood"),
    # toys and sports
    "ball": ("toy", "round handheld"),
    "kite": ("toy", "can_fly in_sky fabric"),
    "doll": ("toy", "handheld indoors plastic"),
    "balloon": ("toy", "round can_fly in_sky handheld"),
    "skateboard": ("toy", "wheels wood"),
    "puzzle": ("toy", "indoors"),
    "frisbee": ("toy", "round plastic handheld"),
    "racket": ("toy", "handheld"),
    # household objects
    "book": ("household", "handheld"),
    "pen": ("household", "handheld writing plastic"),
    "pencil": ("household", "handheld writing wood"),
    "crayon": ("household", "handheld writing"),
    "paper": ("household", "handheld writing"),
    "envelope": ("household", "handheld container"),
    "key": ("household", "handheld metal"),
    "coin": ("household", "handheld metal round"),
    "wallet": ("household", "handheld container"),
    "umbrella": ("household", "handheld fabric"),
    "candle": ("household", "handheld"),
    "pillow": ("household", "fabric"),
    "blanket": ("household", "fabric"),
    "towel": ("household", "fabric handheld"),
    "soap": ("household", "handheld"),
    "toothbrush": ("household", "handheld plastic"),
    "comb": ("household", "handheld plastic"),
    "basket": ("household", "container"),
    "box": ("household", "container"),
    "bag": ("household", "container handheld fabric"),
    "bucket": ("household", "container handheld plastic"),
    "mirror": ("household", ""),
    "door": ("household", "big wood"),
    "window": ("household", "big"),
    # nature
    "sun": ("nature", "in_sky big round"),
    "moon": ("nature", "in_sky big round"),
    "star": ("nature", "in_sky big"),
    "cloud": ("nature", "in_sky big"),
    "rainbow": ("nature", "in_sky big"),
    "mountain": ("nature", "big"),
    "river": ("nature", "big in_water"),
    "ocean": ("nature", "big in_water"),
    "rock": ("nature", "handheld"),
    "sand": ("nature", ""),
    "snow": ("nature", ""),
    "island": ("nature", "big"),
    "volcano": ("nature", "big dangerous"),
    # buildings and structures
    "house": ("building", ""),
    "bridge": ("building", "metal"),
    "castle": ("building", ""),
    "tower": ("building", ""),
    "school": ("building", ""),
    "hospital": ("building", ""),
    "church": ("building", ""),
    "barn": ("building", "farm wood"),
    "tent": ("building", "fabric"),
}

# Sparse attributes, listed by attribute (added to the words' rows above).
_SPARSE: dict[str, str] = {
    "liquid": "milk coffee tea juice lemonade soda water soup honey ocean river",
    "stripes": "zebra tiger bee",
    "red": "apple cherry strawberry ladybug rose",
    "yellow": "banana lemon corn sun sunflower butter cheese mango pineapple bee honey",
    "green": "grass lettuce broccoli cucumber spinach celery pea frog cactus fern tree cabbage pear grasshopper parrot crocodile",
    "white": "milk snow egg rice cloud paper swan sheep goose garlic popcorn moon",
    "brown": "bear potato bread chocolate coffee cookie camel deer squirrel monkey kangaroo donkey owl turkey coconut",
}

SYNONYMS: dict[str, str] = {
    "plane": "airplane",
    "aeroplane": "airplane",
    "jet": "airplane",
    "tv": "television",
    "telly": "television",
    "couch": "sofa",
    "cellphone": "phone",
    "smartphone": "phone",
    "telephone": "phone",
    "mobile": "phone",
    "bike": "bicycle",
    "automobile": "car",
    "fridge": "refrigerator",
    "pc": "computer",
    "kitty": "cat",
    "puppy": "dog",
    "bunny": "rabbit",
    "biscuit": "cookie",
    "motorbike": "motorcycle",
    "lorry": "truck",
    "sneaker": "shoe",
    "jumper": "sweater",
    "mug": "cup",
    "seashell": "starfish",
}
"""Other names of KB words, understood in questions and guesses (e.g. "Is it a plane?")."""


@dataclass(frozen=True, eq=False)
class KnowledgeBase:
    """A total table of words × :class:`Attribute` (every cell True or False)."""

    table: Mapping[str, frozenset[Attribute]]
    """For each word, the attributes that are True (all others are False)."""
    kinds: Mapping[str, str]
    """For each word, its kind (``mammal``, ``fruit``, ``vehicle``...), for curricula and reports."""
    synonyms: Mapping[str, str]
    """Other names of words (``"plane" -> "airplane"``)."""

    @property
    def words(self) -> tuple[str, ...]:
        """All words, sorted."""
        return tuple(sorted(self.table))

    def has(self, word: str, attribute: Attribute) -> bool:
        """Whether ``attribute`` is True of ``word`` (KeyError for a word not in the table)."""
        try:
            return attribute in self.table[word]
        except KeyError:
            raise KeyError(f"word {word!r} is not in the twenty-questions knowledge base") from None

    def row(self, word: str) -> dict[Attribute, bool]:
        """The full row of ``word``: every attribute with its value."""
        true = self.table[word]
        return {a: a in true for a in Attribute}

    def canonical(self, name: str) -> str | None:
        """The KB word a name refers to (itself or a synonym), or None."""
        name = name.lower()
        if name in self.table:
            return name
        return self.synonyms.get(name)

    def __reduce__(self) -> tuple:
        # the default KB pickles by reference (cheap, and identical after unpickling)
        if self is default_kb():
            return (default_kb, ())
        return (KnowledgeBase, (dict(self.table), dict(self.kinds), dict(self.synonyms)))


def _parse_attrs(spec: str, where: str) -> tuple[set[Attribute], set[Attribute]]:
    add: set[Attribute] = set()
    remove: set[Attribute] = set()
    for token in spec.split():
        target, name = (remove, token[1:]) if token.startswith("-") else (add, token.lstrip("+"))
        try:
            target.add(Attribute(name))
        except ValueError:
            raise ValueError(f"{where}: unknown attribute {name!r}") from None
    return add, remove


def build_kb(
    table: Mapping[str, tuple[str, str]] | None = None,
    kinds: Mapping[str, str] | None = None,
    synonyms: Mapping[str, str] | None = None,
) -> KnowledgeBase:
    """Resolve a compact ``word -> (kind, "+attr -attr")`` table into a :class:`KnowledgeBase`."""
    sparse = _SPARSE if table is None else {}
    table = _TABLE if table is None else table
    kinds = _KINDS if kinds is None else kinds
    synonyms = SYNONYMS if synonyms is None else synonyms
    defaults = {kind: _parse_attrs(spec, f"kind {kind!r}")[0] for kind, spec in kinds.items()}
    resolved: dict[str, frozenset[Attribute]] = {}
    word_kinds: dict[str, str] = {}
    for word, (kind, spec) in table.items():
        if kind not in defaults:
            raise ValueError(f"word {word!r}: unknown kind {kind!r}")
        if not word.isalpha() or word != word.lower():
            raise ValueError(f"word {word!r}: KB words are single lowercase words")
        add, remove = _parse_attrs(spec, f"word {word!r}")
        resolved[word] = frozenset((defaults[kind] | add) - remove)
        word_kinds[word] = kind
    for name, listed in sparse.items():
        attribute = Attribute(name)
        for word in listed.split():
            if word not in resolved:
                raise ValueError(f"sparse attribute {name!r}: unknown word {word!r}")
            resolved[word] = resolved[word] | {attribute}
    for alias, target in synonyms.items():
        if target not in resolved:
            raise ValueError(f"synonym {alias!r} points to unknown word {target!r}")
    return KnowledgeBase(table=resolved, kinds=word_kinds, synonyms=dict(synonyms))


@functools.cache
def default_kb() -> KnowledgeBase:
    """TurnGym's own knowledge base (built once per process)."""
    return build_kb()


def words_with(kb: KnowledgeBase, attribute: Attribute, words: Iterable[str] | None = None) -> list[str]:
    """The words (of ``words``, default all) for which ``attribute`` is True."""
    return [w for w in (kb.words if words is None else words) if kb.has(w, attribute)]
