"""A review folder's settings: its atlas.toml under the ATLAS_* variables, relative paths from the folder, its state
inside it, a misspelt or bad setting named with the file; found by ATLAS_REVIEW or from the working directory up."""

from pathlib import Path

import pytest

from atlas_pipeline.config.review_folder import ReviewFolderError, find_review, init_review
from atlas_pipeline.config.settings import SettingsError, load_settings


def test_a_review_keeps_its_settings_and_its_state_in_its_folder(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    review = init_review(tmp_path / "statins", str(papers))
    with review.file.open("a", encoding="utf-8") as handle:
        handle.write('llm_concurrency = 3\nocr = false\ngold = "gold.jsonl"\n')
    settings = load_settings({"ATLAS_REVIEW": str(review.root)})
    assert settings.project.knowledge_base == str(papers)
    assert settings.project.artifacts == str(review.root / "state" / "artifacts")
    assert settings.project.exports == str(review.root / "exports")
    assert settings.review.users == str(review.root / "state" / "review_users.json")
    assert (settings.llm.concurrency, settings.parsing.ocr) == (3, False)
    assert settings.review.gold == str(review.root / "gold.jsonl")  # relative to the review's folder
    assert review.dagster_home == review.root / "state" / "dagster_home"
    # an ATLAS_* variable still wins
    assert load_settings({"ATLAS_REVIEW": str(review.root), "ATLAS_LLM_CONCURRENCY": "5"}).llm.concurrency == 5
    # found from the working directory up, ATLAS_REVIEW first
    inside = review.root / "exports"
    assert find_review({}, inside).root == review.root
    assert find_review({}, tmp_path) is None


def test_a_misspelt_or_bad_setting_in_the_file_is_named_with_the_file(tmp_path):
    review = init_review(tmp_path / "r")
    text = review.file.read_text(encoding="utf-8")
    review.file.write_text(text + "llm_concurency = 3\n", encoding="utf-8")
    with pytest.raises(
        SettingsError, match=r"llm_concurency is not an Atlas setting \(did you mean llm_concurrency\?\)"
    ):
        load_settings({"ATLAS_REVIEW": str(review.root)})
    review.file.write_text(text + 'llm_concurrency = "many"\n', encoding="utf-8")
    with pytest.raises(SettingsError, match=r"atlas\.toml \[settings\] llm_concurrency='many'"):
        load_settings({"ATLAS_REVIEW": str(review.root)})
    with pytest.raises(SettingsError, match=r"no atlas\.toml there"):
        load_settings({"ATLAS_REVIEW": str(tmp_path / "nowhere")})


def test_init_never_overwrites_a_review_and_refuses_a_missing_knowledge_base(tmp_path):
    review = init_review(tmp_path / "r")
    assert (review.root / "knowledge_base").is_dir() and (review.root / "state").is_dir()
    with pytest.raises(ReviewFolderError, match="already a review"):
        init_review(review.root)
    with pytest.raises(ReviewFolderError, match="no such folder"):
        init_review(tmp_path / "other", str(tmp_path / "missing"))
    assert not (tmp_path / "other" / "atlas.toml").exists()
    assert init_review(tmp_path / "s3", "s3://bucket/papers").settings["knowledge_base"] == "s3://bucket/papers"
    assert Path(review.setting_values()["knowledge_base"]) == review.root / "knowledge_base"


def test_atlas_settings_says_which_review_it_reads(tmp_path, monkeypatch, capsys):
    from atlas_pipeline.cli.main import main

    review = init_review(tmp_path / "r")
    monkeypatch.chdir(review.root / "exports")  # found from inside the folder
    monkeypatch.setenv("ATLAS_REVIEW", "")  # restored after the test: main exports the review it found
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# review {review.root}: its atlas.toml")
    assert str(review.root / "state" / "artifacts") in out
