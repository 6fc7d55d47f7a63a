"""The words whose change changes what a sentence says — negations, opposite prefixes, words of opposite direction,
antonym pairs, numbers written as words — so that a quote differing from the source by one of them is never
verified (``grading.quotes``) and a value is never taken from a negated phrase (``grading.values``)."""

from __future__ import annotations


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


NEGATIONS = frozenset(
    words("no not non nor neither none never without cannot nobody nothing nowhere lack lacked lacking absence absent")
)
NEGATION_PREFIXES = ("non", "un", "in", "im", "il", "ir", "dis", "anti", "a")
# prefixes that turn a word into its opposite when swapped for each other
OPPOSITE_PREFIXES = frozenset(
    frozenset(pair)
    for pair in (
        ("in", "de"),
        ("hyper", "hypo"),
        ("pre", "post"),
        ("in", "out"),
        ("over", "under"),
        ("inter", "intra"),
        ("sub", "super"),
        ("up", "down"),
        ("max", "min"),
        ("high", "low"),
        ("in", "ex"),
        ("im", "ex"),
        ("fe", ""),
        ("wo", ""),
        ("ante", "post"),
        ("intra", "extra"),
        ("endo", "exo"),
        ("pro", "anti"),
        ("mono", "poly"),
        ("uni", "bi"),
        ("bi", "tri"),
        ("hetero", "homo"),
    )
)
POLARITY = (
    words(
        "increase increased increases increasing higher high highest more most greater greatest larger largest above "
        "over rise rose risen raised elevated gain gained superior better best improved improvement improve improves "
        "positive maximum longer longest exceed exceeded exceeds plus many"
    ),
    words(
        "decrease decreased decreases decreasing reduction reduce reduced reduces lower low lowest less least fewer "
        "smaller smallest below under fall fell fallen drop dropped loss lost inferior worse worst worsened worsening "
        "deteriorated negative minimum shorter shortest minus few"
    ),
)
OPPOSITE_WORDS = (
    frozenset({"before", "after"}),
    frozenset({"with", "without"}),
    frozenset({"intervention", "control"}),
    frozenset({"treatment", "placebo"}),
    frozenset({"experimental", "control"}),
    frozenset({"included", "excluded"}),
    frozenset({"inclusion", "exclusion"}),
    frozenset({"first", "last"}),
    frozenset({"left", "right"}),
    frozenset({"all", "none"}),
    frozenset({"always", "never"}),
    frozenset({"true", "false"}),
    frozenset({"yes", "no"}),
    frozenset({"accepted", "rejected"}),
)
NUMBER_WORDS = words(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion once "
    "twice thrice half quarter third fourth fifth double triple single dozen none both all either neither"
)


def is_negation(word: str) -> bool:
    return word in NEGATIONS or word.endswith("n't")


def _common_suffix(a: str, b: str) -> int:
    length = 0
    while length < min(len(a), len(b)) and a[-1 - length] == b[-1 - length]:
        length += 1
    return length


def opposed(a: str, b: str) -> bool:
    """Do two different words say opposite things (polarity, negation prefix, opposite prefix, antonym pair)?"""
    if a == b:
        return False
    if is_negation(a) or is_negation(b):
        return True
    for group in OPPOSITE_WORDS:
        if a in group and b in group:
            return True
    if any(a in side for side in POLARITY) and any(b in side for side in POLARITY):
        return not any(a in side and b in side for side in POLARITY)
    suffix = _common_suffix(a, b)
    if suffix >= 3:
        head_a, head_b = a[: len(a) - suffix], b[: len(b) - suffix]
        if frozenset((head_a, head_b)) in OPPOSITE_PREFIXES:
            return True
        if (not head_a and head_b in NEGATION_PREFIXES) or (not head_b and head_a in NEGATION_PREFIXES):
            return True
    return False
