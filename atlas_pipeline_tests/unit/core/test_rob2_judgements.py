"""RoB 2's algorithms against the guidance's mapping tables (22 August 2019), path by path: every consistent set of
answers of every domain is judged by the algorithm and by the table row it matches, and each matches one row."""

from collections.abc import Iterator

import pytest

from atlas_pipeline.core.rob2_judgements import (
    HIGH,
    LOW,
    SOME,
    Judgement,
    Override,
    judge_domain,
    judge_overall,
    judge_result,
)
from atlas_pipeline.core.rob2_tool import D1, D2_ADHERING, D2_ASSIGNMENT, D3, D4, D5, NA, Answer, Domain, Effect, Tool

ANY = "Y PY PN N NI NA"
# The guidance's tables as written there: per row, the answers it covers (space-separated) per question, and the
# judgement. "NA": not asked (its condition unmet).
D1_TABLE = [
    ({"1.1": "Y PY NI", "1.2": "Y PY", "1.3": "N PN NI"}, LOW),
    ({"1.1": "Y PY NI", "1.2": "Y PY", "1.3": "Y PY"}, SOME),
    ({"1.1": "N PN", "1.2": "Y PY", "1.3": ANY}, SOME),
    ({"1.1": ANY, "1.2": "NI", "1.3": "N PN NI"}, SOME),
    ({"1.1": ANY, "1.2": "NI", "1.3": "Y PY"}, HIGH),
    ({"1.1": ANY, "1.2": "N PN", "1.3": ANY}, HIGH),
]
D2_ASSIGNMENT_PART_1 = [  # questions 2.1 to 2.5
    ({"2.1": "N PN", "2.2": "N PN"}, LOW),
    ({"aware": "yes", "2.3": "N PN"}, LOW),
    ({"aware": "yes", "2.3": "NI"}, SOME),
    ({"aware": "yes", "2.3": "Y PY", "2.4": "N PN"}, SOME),
    ({"aware": "yes", "2.3": "Y PY", "2.4": "Y PY NI", "2.5": "Y PY"}, SOME),
    ({"aware": "yes", "2.3": "Y PY", "2.4": "Y PY NI", "2.5": "N PN NI"}, HIGH),
]
D2_ASSIGNMENT_PART_2 = [  # questions 2.6 and 2.7
    ({"2.6": "Y PY"}, LOW),
    ({"2.6": "N PN NI", "2.7": "N PN"}, SOME),
    ({"2.6": "N PN NI", "2.7": "Y PY NI"}, HIGH),
]
D2_ADHERING_TABLE = [
    ({"2.1": "N PN", "2.2": "N PN", "2.4": "NA N PN", "2.5": "NA N PN"}, LOW),
    ({"aware": "yes", "2.3": "NA Y PY", "2.4": "NA N PN", "2.5": "NA N PN"}, LOW),
    ({"aware": "yes", "2.3": "N PN NI", "2.6": "Y PY"}, SOME),
    ({"aware": "yes", "2.3": "N PN NI", "2.6": "N PN NI"}, HIGH),
    ({"2.3": "NA Y PY", "problem": "yes", "2.6": "Y PY"}, SOME),  # failures or non-adherence: Y/PY/NI to 2.4 or 2.5
    ({"2.3": "NA Y PY", "problem": "yes", "2.6": "N PN NI"}, HIGH),
]
D3_TABLE = [
    ({"3.1": "Y PY"}, LOW),
    ({"3.1": "N PN NI", "3.2": "Y PY"}, LOW),
    ({"3.1": "N PN NI", "3.2": "N PN", "3.3": "N PN"}, LOW),
    ({"3.1": "N PN NI", "3.2": "N PN", "3.3": "Y PY NI", "3.4": "N PN"}, SOME),
    ({"3.1": "N PN NI", "3.2": "N PN", "3.3": "Y PY NI", "3.4": "Y PY NI"}, HIGH),
]
D4_TABLE = [
    ({"4.1": "Y PY"}, HIGH),
    ({"4.1": "N PN NI", "4.2": "Y PY"}, HIGH),
    ({"4.1": "N PN NI", "4.2": "N PN", "4.3": "N PN"}, LOW),
    ({"4.1": "N PN NI", "4.2": "N PN", "4.3": "Y PY NI", "4.4": "N PN"}, LOW),
    ({"4.1": "N PN NI", "4.2": "N PN", "4.3": "Y PY NI", "4.4": "Y PY NI", "4.5": "N PN"}, SOME),
    ({"4.1": "N PN NI", "4.2": "N PN", "4.3": "Y PY NI", "4.4": "Y PY NI", "4.5": "Y PY NI"}, HIGH),
    ({"4.1": "N PN NI", "4.2": "NI", "4.3": "N PN"}, SOME),
    ({"4.1": "N PN NI", "4.2": "NI", "4.3": "Y PY NI", "4.4": "N PN"}, SOME),
    ({"4.1": "N PN NI", "4.2": "NI", "4.3": "Y PY NI", "4.4": "Y PY NI", "4.5": "N PN"}, SOME),
    ({"4.1": "N PN NI", "4.2": "NI", "4.3": "Y PY NI", "4.4": "Y PY NI", "4.5": "Y PY NI"}, HIGH),
]
D5_TABLE = [
    ({"5.2": "N PN", "5.3": "N PN", "5.1": "Y PY"}, LOW),
    ({"5.2": "N PN", "5.3": "N PN", "5.1": "N PN NI"}, SOME),
    ({"neither_yes_one_ni": "yes"}, SOME),
    ({"either_yes": "yes"}, HIGH),
]


def _matches(row: dict[str, str], answers: dict[str, Answer]) -> bool:
    for question, allowed in row.items():
        if question == "aware":
            ok = answers["2.1"] not in (Answer.NO, Answer.PROBABLY_NO) or answers["2.2"] not in ("N", "PN")
        elif question == "problem":
            ok = answers["2.4"] in ("Y", "PY", "NI") or answers["2.5"] in ("Y", "PY", "NI")
        elif question == "either_yes":
            ok = answers["5.2"] in ("Y", "PY") or answers["5.3"] in ("Y", "PY")
        elif question == "neither_yes_one_ni":
            pair = (answers["5.2"], answers["5.3"])
            ok = "NI" in pair and not {"Y", "PY"} & set(pair)
        else:
            ok = answers[question].value in allowed.split()
        if not ok:
            return False
    return True


def _from_table(table: list, answers: dict[str, Answer]) -> Judgement:
    rows = [judgement for row, judgement in table if _matches(row, answers)]
    assert len(rows) == 1, f"{answers}: {len(rows)} rows of the table match"
    return rows[0]


def consistent_answers(domain: Domain, applicable: frozenset[str] | None = None) -> Iterator[dict[str, Answer]]:
    """Every full set of answers a person can give: each question asked answered with one of its options, every
    question not asked 'Not applicable'."""

    def extend(index: int, given: dict[str, Answer]) -> Iterator[dict[str, Answer]]:
        if index == len(domain.questions):
            yield dict(given)
            return
        question = domain.questions[index]
        asked = question.asked(given, applicable is None or question.id in applicable)
        assert asked is not None  # earlier questions are all answered
        for option in [o for o in question.options if o != NA] if asked else [NA]:
            given[question.id] = option
            yield from extend(index + 1, given)
        given.pop(question.id, None)

    yield from extend(0, {})


def _combined(first: Judgement, second: Judgement) -> Judgement:  # the guidance's "criteria for the domain"
    return HIGH if HIGH in (first, second) else LOW if first == second == LOW else SOME


def _check(domain: Domain, expected, applicable: frozenset[str] | None = None) -> int:
    checked = 0
    for answers in consistent_answers(domain, applicable):
        judged = judge_domain(domain, answers, applicable)
        assert judged.missing == ()
        assert judged.proposed == expected(answers), (domain.code, answers, judged.path)
        checked += 1
    return checked


def test_d1_randomisation_every_path():
    assert _check(D1, lambda a: _from_table(D1_TABLE, a)) == 125


def test_d2_effect_of_assignment_every_path():
    def expected(answers):
        return _combined(_from_table(D2_ASSIGNMENT_PART_1, answers), _from_table(D2_ASSIGNMENT_PART_2, answers))

    assert _check(D2_ASSIGNMENT, expected) > 1000


@pytest.mark.parametrize("applicable", [None, frozenset(), frozenset({"2.3"}), frozenset({"2.4", "2.5"})])
def test_d2_effect_of_adhering_every_path_whichever_questions_the_review_addresses(applicable):
    assert _check(D2_ADHERING, lambda a: _from_table(D2_ADHERING_TABLE, a), applicable) > 0


def test_d3_missing_outcome_data_every_path():
    assert _check(D3, lambda a: _from_table(D3_TABLE, a)) > 50
    assert "NI" not in [o.value for o in D3.question("3.2").options]  # the guidance offers none there


def test_d4_measurement_every_path():
    assert _check(D4, lambda a: _from_table(D4_TABLE, a)) > 100


def test_d5_selection_of_the_reported_result_every_path():
    assert _check(D5, lambda a: _from_table(D5_TABLE, a)) == 125


def test_nothing_is_judged_while_an_answer_it_needs_is_missing():
    partial = judge_domain(D1, {"1.1": Answer.YES, "1.2": Answer.YES})
    assert partial.proposed is None and partial.missing == ("1.3",)
    # a conditional question whose condition is met: 'Not applicable' is no answer
    asked = judge_domain(D3, {"3.1": Answer.NO, "3.2": Answer.NOT_APPLICABLE})
    assert asked.proposed is None and asked.missing == ("3.2",)
    # an answer the question does not offer is no answer (3.2 offers no 'No information')
    offered = judge_domain(D3, {"3.1": Answer.NO, "3.2": Answer.NO_INFORMATION})
    assert offered.proposed is None and offered.missing == ("3.2",)
    with pytest.raises(ValueError, match=r"answer 3\.2 first"):
        offered.overridden(Override(HIGH, "the authors lost half the children"))
    # its answers past an unmet condition are ignored, not judged on
    ignored = judge_domain(D3, {"3.1": Answer.YES, "3.2": Answer.NO, "3.3": Answer.YES, "3.4": Answer.YES})
    assert ignored.proposed == LOW and ignored.path == ("3.1=Y",)


def test_overall_and_overrides_kept_beside_the_proposal():
    tool = Tool(Effect.ASSIGNMENT)
    low = {"1.1": "Y", "1.2": "Y", "1.3": "N"}
    answers = {
        "D1": low,
        "D2": {"2.1": "N", "2.2": "N", "2.6": "Y"},
        "D3": {"3.1": "Y"},
        "D4": {"4.1": "N", "4.2": "N", "4.3": "N"},
        "D5": {"5.1": "Y", "5.2": "N", "5.3": "N"},
    }
    typed = {code: {q: Answer(a) for q, a in given.items()} for code, given in answers.items()}
    judged = judge_result(tool, typed)
    assert [j.judgement for j in judged] == [LOW] * 6 and judged[-1].domain == "Overall"
    typed["D5"]["5.1"] = Answer.NO_INFORMATION
    assert judge_result(tool, typed)[-1].judgement == SOME
    typed["D3"] = {}
    overall = judge_result(tool, typed)[-1]
    assert overall.judgement is None and overall.missing == ("D3",)
    override = Override(HIGH, "some concerns in two domains that together lower confidence substantially", "ana")
    typed["D3"] = {"3.1": Answer.YES}
    kept = judge_result(tool, typed, {"Overall": override})[-1]
    assert (kept.proposed, kept.judgement, kept.override.reason) == (SOME, HIGH, override.reason)
    with pytest.raises(ValueError, match="needs its reason"):
        judge_overall([]).overridden(Override(LOW, "  "))
