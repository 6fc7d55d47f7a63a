"""RoB 2, Cochrane's risk-of-bias tool for randomised trials, as the guidance states it: five domains, their
signalling questions, the answers each allows and the condition under which each conditional question is asked.

Source: Sterne JAC, Savović J, Page MJ, et al. *RoB 2: a revised tool for assessing risk of bias in randomised
trials.* BMJ 2019;366:l4898, and its full guidance document *Revised Cochrane risk-of-bias tool for randomized
trials (RoB 2)*, edited by Higgins, Savović, Page, Sterne, version of 22 August 2019 (riskofbias.info), for
individually randomised, parallel-group trials — its tables "Signalling questions / Response options" of each domain.
Questions are worded as there (the guidance's elaborations are left to the documentation); numbering is the
guidance's own, domain 2 in its two variants (the effect of assignment to intervention, and of adhering to it),
which a review chooses. Judgements from the answers: ``core.rob2_judgements``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Answer(StrEnum):
    """A signalling question's answer (the guidance's abbreviations)."""

    YES = "Y"
    PROBABLY_YES = "PY"
    PROBABLY_NO = "PN"
    NO = "N"
    NO_INFORMATION = "NI"
    NOT_APPLICABLE = "NA"  # a conditional question whose condition the earlier answers do not meet

    @property
    def label(self) -> str:
        return ANSWER_LABELS[self]


ANSWER_LABELS = {
    Answer.YES: "Yes",
    Answer.PROBABLY_YES: "Probably yes",
    Answer.PROBABLY_NO: "Probably no",
    Answer.NO: "No",
    Answer.NO_INFORMATION: "No information",
    Answer.NOT_APPLICABLE: "Not applicable",
}

Y, PY, PN, N, NI, NA = (
    Answer.YES,
    Answer.PROBABLY_YES,
    Answer.PROBABLY_NO,
    Answer.NO,
    Answer.NO_INFORMATION,
    Answer.NOT_APPLICABLE,
)
YES_SIDE = frozenset({Y, PY})
NO_SIDE = frozenset({N, PN})
FIVE = (Y, PY, PN, N, NI)  # the options of a question always asked
CONDITIONAL = (NA, *FIVE)


class Effect(StrEnum):
    """What domain 2 is about (the review's choice, per outcome): the guidance has one variant of the domain each."""

    ASSIGNMENT = "assignment"  # the effect of assignment to intervention (the 'intention-to-treat' effect)
    ADHERING = "adhering"  # the effect of adhering to intervention (the 'per-protocol' effect)


@dataclass(frozen=True)
class Condition:
    """When a conditional question is asked: one of ``questions`` answered among ``answers`` (``every``: all of
    them), as the guidance's "If Y/PY/NI to 2.1 or 2.2:" says."""

    questions: tuple[str, ...]
    answers: frozenset[Answer]
    every: bool = False

    def met(self, given: Mapping[str, Answer]) -> bool | None:
        """Whether the earlier answers meet the condition; None while one it depends on is not answered yet."""
        found = [given.get(question) for question in self.questions]
        hits = [answer in self.answers for answer in found if answer is not None]
        if self.every:
            return False if not all(hits) else (True if len(hits) == len(found) else None)
        return True if any(hits) else (False if len(hits) == len(found) else None)

    def text(self) -> str:
        order = [a for a in (Y, PY, PN, N, NI) if a in self.answers]
        joiner = " and " if self.every else " or "
        return f"If {'/'.join(order)} to {joiner.join(self.questions)}"


@dataclass(frozen=True)
class SignallingQuestion:
    id: str  # the guidance's number, e.g. "2.3"
    text: str
    options: tuple[Answer, ...] = FIVE
    asked_when: tuple[Condition, ...] = ()  # any of them (the guidance's "If N/PN/NI to 2.3, or Y/PY/NI to 2.4")
    if_applicable: bool = False  # asked only where the review's preliminary considerations say it addresses it

    def asked(self, given: Mapping[str, Answer], applicable: bool = True) -> bool | None:
        """Whether the question is asked given the answers so far (None: not known until an earlier one is)."""
        if self.if_applicable and not applicable:
            return False
        if not self.asked_when:
            return True
        met = [condition.met(given) for condition in self.asked_when]
        return True if any(met) else (False if all(m is False for m in met) else None)

    def condition_text(self) -> str:
        prefix = "[If applicable] " if self.if_applicable else ""
        return prefix + ", or ".join(condition.text() for condition in self.asked_when)


@dataclass(frozen=True)
class Domain:
    code: str  # "D1" … "D5"
    name: str
    questions: tuple[SignallingQuestion, ...]
    effect: Effect | None = None  # domain 2's variant

    def question(self, question_id: str) -> SignallingQuestion:
        return next(q for q in self.questions if q.id == question_id)

    def asked(self, given: Mapping[str, Answer], applicable: frozenset[str] | None = None) -> dict[str, bool | None]:
        """Per question, whether it is asked given ``given`` (None: an earlier answer is needed first);
        ``applicable``: the "[If applicable]" questions the review addresses (None: all of them)."""
        known = dict(given)
        asked: dict[str, bool | None] = {}
        for question in self.questions:  # in order: a question not asked reads as 'Not applicable' to later ones
            asked[question.id] = question.asked(known, applicable is None or question.id in applicable)
            if asked[question.id] is False:
                known[question.id] = NA
        return asked


def _if(questions: str, answers: frozenset[Answer] | tuple[Answer, ...], every: bool = False) -> Condition:
    return Condition(tuple(questions.split()), frozenset(answers), every)


_Y_PY_NI = (Y, PY, NI)
_N_PN_NI = (N, PN, NI)

D1 = Domain(
    "D1",
    "Risk of bias arising from the randomization process",
    (
        SignallingQuestion("1.1", "Was the allocation sequence random?"),
        SignallingQuestion(
            "1.2",
            "Was the allocation sequence concealed until participants were enrolled and assigned to interventions?",
        ),
        SignallingQuestion(
            "1.3",
            "Did baseline differences between intervention groups suggest a problem with the randomization process?",
        ),
    ),
)

_AWARE = (
    SignallingQuestion("2.1", "Were participants aware of their assigned intervention during the trial?"),
    SignallingQuestion(
        "2.2",
        "Were carers and people delivering the interventions aware of participants' assigned intervention during the "
        "trial?",
    ),
)

D2_ASSIGNMENT = Domain(
    "D2",
    "Risk of bias due to deviations from the intended interventions (effect of assignment to intervention)",
    (
        *_AWARE,
        SignallingQuestion(
            "2.3",
            "Were there deviations from the intended intervention that arose because of the trial context?",
            CONDITIONAL,
            (_if("2.1 2.2", _Y_PY_NI),),
        ),
        SignallingQuestion(
            "2.4", "Were these deviations likely to have affected the outcome?", CONDITIONAL, (_if("2.3", YES_SIDE),)
        ),
        SignallingQuestion(
            "2.5",
            "Were these deviations from intended intervention balanced between groups?",
            CONDITIONAL,
            (_if("2.4", _Y_PY_NI),),
        ),
        SignallingQuestion(
            "2.6", "Was an appropriate analysis used to estimate the effect of assignment to intervention?"
        ),
        SignallingQuestion(
            "2.7",
            "Was there potential for a substantial impact (on the result) of the failure to analyse participants in "
            "the group to which they were randomized?",
            CONDITIONAL,
            (_if("2.6", _N_PN_NI),),
        ),
    ),
    Effect.ASSIGNMENT,
)

D2_ADHERING = Domain(
    "D2",
    "Risk of bias due to deviations from the intended interventions (effect of adhering to intervention)",
    (
        *_AWARE,
        SignallingQuestion(
            "2.3",
            "Were important non-protocol interventions balanced across intervention groups?",
            CONDITIONAL,
            (_if("2.1 2.2", _Y_PY_NI),),
            if_applicable=True,
        ),
        SignallingQuestion(
            "2.4",
            "Were there failures in implementing the intervention that could have affected the outcome?",
            CONDITIONAL,
            if_applicable=True,
        ),
        SignallingQuestion(
            "2.5",
            "Was there non-adherence to the assigned intervention regimen that could have affected participants' "
            "outcomes?",
            CONDITIONAL,
            if_applicable=True,
        ),
        SignallingQuestion(
            "2.6",
            "Was an appropriate analysis used to estimate the effect of adhering to the intervention?",
            CONDITIONAL,
            (_if("2.3", _N_PN_NI), _if("2.4 2.5", _Y_PY_NI)),
        ),
    ),
    Effect.ADHERING,
)

D3 = Domain(
    "D3",
    "Risk of bias due to missing outcome data",
    (
        SignallingQuestion(
            "3.1", "Were data for this outcome available for all, or nearly all, participants randomized?"
        ),
        SignallingQuestion(
            "3.2",
            "Is there evidence that the result was not biased by missing outcome data?",
            (NA, Y, PY, PN, N),  # the guidance offers no 'No information' here
            (_if("3.1", _N_PN_NI),),
        ),
        SignallingQuestion(
            "3.3", "Could missingness in the outcome depend on its true value?", CONDITIONAL, (_if("3.2", NO_SIDE),)
        ),
        SignallingQuestion(
            "3.4",
            "Is it likely that missingness in the outcome depended on its true value?",
            CONDITIONAL,
            (_if("3.3", _Y_PY_NI),),
        ),
    ),
)

D4 = Domain(
    "D4",
    "Risk of bias in measurement of the outcome",
    (
        SignallingQuestion("4.1", "Was the method of measuring the outcome inappropriate?"),
        SignallingQuestion(
            "4.2", "Could measurement or ascertainment of the outcome have differed between intervention groups?"
        ),
        SignallingQuestion(
            "4.3",
            "Were outcome assessors aware of the intervention received by study participants?",
            CONDITIONAL,
            (_if("4.1 4.2", _N_PN_NI, every=True),),
        ),
        SignallingQuestion(
            "4.4",
            "Could assessment of the outcome have been influenced by knowledge of intervention received?",
            CONDITIONAL,
            (_if("4.3", _Y_PY_NI),),
        ),
        SignallingQuestion(
            "4.5",
            "Is it likely that assessment of the outcome was influenced by knowledge of intervention received?",
            CONDITIONAL,
            (_if("4.4", _Y_PY_NI),),
        ),
    ),
)

D5 = Domain(
    "D5",
    "Risk of bias in selection of the reported result",
    (
        SignallingQuestion(
            "5.1",
            "Were the data that produced this result analysed in accordance with a pre-specified analysis plan that "
            "was finalized before unblinded outcome data were available for analysis?",
        ),
        SignallingQuestion(
            "5.2",
            "Is the numerical result being assessed likely to have been selected, on the basis of the results, from "
            "multiple eligible outcome measurements (e.g. scales, definitions, time points) within the outcome domain?",
        ),
        SignallingQuestion(
            "5.3",
            "Is the numerical result being assessed likely to have been selected, on the basis of the results, from "
            "multiple eligible analyses of the data?",
        ),
    ),
)


@dataclass(frozen=True)
class Tool:
    """The five domains as one review asks them (domain 2 in the variant it chose)."""

    effect: Effect = Effect.ASSIGNMENT
    domains: tuple[Domain, ...] = field(init=False)

    def __post_init__(self) -> None:
        second = D2_ASSIGNMENT if self.effect == Effect.ASSIGNMENT else D2_ADHERING
        object.__setattr__(self, "domains", (D1, second, D3, D4, D5))

    def domain(self, code: str) -> Domain:
        return next(d for d in self.domains if d.code == code)
