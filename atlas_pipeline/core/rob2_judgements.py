"""RoB 2 judgements from the signalling questions' answers, by the guidance's algorithms — so a judgement always
says which answers it went by, and none is made while an answer it needs is missing.

Source: the guidance document *Revised Cochrane risk-of-bias tool for randomized trials (RoB 2)*, 22 August 2019
(riskofbias.info), "Algorithm for suggested judgement of risk of bias" of each domain (figures and tables for
individually randomised, parallel-group trials), and its "Overall risk-of-bias judgement" criteria (also Sterne et
al., BMJ 2019;366:l4898, Table 2; Cochrane Handbook chapter 8). The algorithms *propose* a judgement; the guidance
lets the assessor depart from it with a reason (``DomainJudgement.override``), e.g. an overall 'High' for some
concerns in several domains that together substantially lower confidence in the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from atlas_pipeline.core.rob2_tool import NA, NI, NO_SIDE, YES_SIDE, Answer, Domain, Effect, Tool


class Judgement(StrEnum):
    LOW = "Low"
    SOME_CONCERNS = "Some concerns"
    HIGH = "High"


LOW, SOME, HIGH = Judgement.LOW, Judgement.SOME_CONCERNS, Judgement.HIGH
_N_PN_NI = NO_SIDE | {NI}
_Y_PY_NI = YES_SIDE | {NI}


@dataclass(frozen=True)
class Override:
    """A person's judgement in place of the algorithm's, with the reason the guidance asks for."""

    judgement: Judgement
    reason: str
    by: str = ""
    at: str = ""


@dataclass(frozen=True)
class DomainJudgement:
    domain: str  # "D1" … "D5", or "Overall"
    proposed: Judgement | None  # the algorithm's; None while an answer (or a domain) it needs is missing
    path: tuple[str, ...] = ()  # the answers it went by, in order: ("1.2=Y", "1.1=PY", "1.3=N")
    missing: tuple[str, ...] = ()  # the questions (or domains) still to answer before it judges
    override: Override | None = None

    @property
    def judgement(self) -> Judgement | None:
        """What the review reports: the person's override where there is one (kept beside the proposal)."""
        return self.override.judgement if self.override is not None else self.proposed

    def overridden(self, override: Override | None) -> DomainJudgement:
        if override is not None and not override.reason.strip():
            raise ValueError(f"{self.domain}: a judgement departing from the algorithm needs its reason")
        if override is not None and self.proposed is None:
            raise ValueError(
                f"{self.domain}: answer {', '.join(self.missing)} first: an override departs from a judgement"
            )
        return replace(self, override=override)


class _Reader:
    """The answers as an algorithm reads them, noting its path."""

    def __init__(self, given: Mapping[str, Answer]) -> None:
        self.given = given
        self.path: list[str] = []

    def __call__(self, question: str) -> Answer:
        answer = self.given.get(question, NA)
        self.path.append(f"{question}={answer.value}")
        return answer


def unanswered(domain: Domain, given: Mapping[str, Answer], applicable: frozenset[str] | None = None) -> list[str]:
    """The questions of ``domain`` asked (given the answers so far) but not answered — 'Not applicable' is no
    answer to a question whose condition is met, nor is an answer the question does not offer (3.2 has no 'No
    information')."""
    asked = domain.asked(given, applicable)
    return [
        question.id
        for question in domain.questions
        if asked[question.id] is not False
        and (given.get(question.id, NA) == NA or given[question.id] not in question.options)
    ]


def _d1(a: _Reader) -> Judgement:
    concealed = a("1.2")
    if concealed in NO_SIDE:
        return HIGH
    if concealed == NI:
        return HIGH if a("1.3") in YES_SIDE else SOME
    if a("1.1") in NO_SIDE:
        return SOME
    return LOW if a("1.3") in _N_PN_NI else SOME


def _d2_assignment(a: _Reader) -> Judgement:
    # part 1 (2.1–2.5): deviations that arose because of the trial context
    if a("2.1") in NO_SIDE and a("2.2") in NO_SIDE:
        first = LOW
    else:
        context = a("2.3")
        if context in NO_SIDE:
            first = LOW
        elif context == NI or a("2.4") in NO_SIDE:  # unknown whether they arose, or they did not affect it
            first = SOME
        else:
            first = SOME if a("2.5") in YES_SIDE else HIGH
    # part 2 (2.6–2.7): the analysis
    second = LOW if a("2.6") in YES_SIDE else SOME if a("2.7") in NO_SIDE else HIGH
    if HIGH in (first, second):
        return HIGH
    return LOW if first == second == LOW else SOME


def _d2_adhering(a: _Reader) -> Judgement:
    aware = not (a("2.1") in NO_SIDE and a("2.2") in NO_SIDE)
    if aware and a("2.3") in _N_PN_NI:  # important non-protocol interventions not balanced (NA: not addressed)
        return SOME if a("2.6") in YES_SIDE else HIGH
    if a("2.4") in {NA} | NO_SIDE and a("2.5") in {NA} | NO_SIDE:
        return LOW
    return SOME if a("2.6") in YES_SIDE else HIGH


def _d3(a: _Reader) -> Judgement:
    if a("3.1") in YES_SIDE:
        return LOW
    if a("3.2") in YES_SIDE:
        return LOW
    if a("3.3") in NO_SIDE:
        return LOW
    return SOME if a("3.4") in NO_SIDE else HIGH


def _d4(a: _Reader) -> Judgement:
    if a("4.1") in YES_SIDE:
        return HIGH
    differed = a("4.2")
    if differed in YES_SIDE:
        return HIGH
    settled = LOW if differed in NO_SIDE else SOME  # 4.2 'No information' caps the domain at some concerns
    if a("4.3") in NO_SIDE:
        return settled
    if a("4.4") in NO_SIDE:
        return settled
    return SOME if a("4.5") in NO_SIDE else HIGH


def _d5(a: _Reader) -> Judgement:
    measurements, analyses = a("5.2"), a("5.3")
    if measurements in YES_SIDE or analyses in YES_SIDE:
        return HIGH
    if measurements in NO_SIDE and analyses in NO_SIDE:
        return LOW if a("5.1") in YES_SIDE else SOME
    return SOME  # at least one 'No information', neither Yes nor Probably yes


_ALGORITHMS: dict[tuple[str, Effect | None], Callable[[_Reader], Judgement]] = {
    ("D1", None): _d1,
    ("D2", Effect.ASSIGNMENT): _d2_assignment,
    ("D2", Effect.ADHERING): _d2_adhering,
    ("D3", None): _d3,
    ("D4", None): _d4,
    ("D5", None): _d5,
}


def judge_domain(
    domain: Domain, given: Mapping[str, Answer], applicable: frozenset[str] | None = None
) -> DomainJudgement:
    """The algorithm's judgement of one domain from its answers; none while a question asked is unanswered.
    ``applicable``: domain 2's "[If applicable]" questions the review addresses (None: all); the others read as
    'Not applicable'."""
    missing = unanswered(domain, given, applicable)
    if missing:
        return DomainJudgement(domain.code, None, missing=tuple(missing))
    asked = domain.asked(given, applicable)
    reader = _Reader({question: answer for question, answer in given.items() if asked.get(question)})
    judgement = _ALGORITHMS[domain.code, domain.effect](reader)
    return DomainJudgement(domain.code, judgement, tuple(reader.path))


def judge_overall(domains: list[DomainJudgement]) -> DomainJudgement:
    """The overall judgement from the five domains' (overrides included): low only if every domain is low, high if
    any is high, some concerns otherwise; none while a domain has no judgement."""
    missing = tuple(d.domain for d in domains if d.judgement is None)
    if missing:
        return DomainJudgement("Overall", None, missing=missing)
    found = [d.judgement for d in domains]
    path = tuple(f"{d.domain}={d.judgement.value}" for d in domains if d.judgement is not None)
    if HIGH in found:
        return DomainJudgement("Overall", HIGH, path)
    return DomainJudgement("Overall", LOW if all(j == LOW for j in found) else SOME, path)


def judge_result(
    tool: Tool,
    answers: Mapping[str, Mapping[str, Answer]],
    overrides: Mapping[str, Override] | None = None,
    applicable: frozenset[str] | None = None,
) -> list[DomainJudgement]:
    """One result's five domain judgements and the overall one (last), from its answers per domain code, with a
    person's overrides (per domain code, or "Overall") kept beside the proposals."""
    overrides = overrides or {}
    domains = [
        judge_domain(domain, answers.get(domain.code, {}), applicable).overridden(overrides.get(domain.code))
        for domain in tool.domains
    ]
    return [*domains, judge_overall(domains).overridden(overrides.get("Overall"))]
