from pathlib import Path

import pytest
from pydantic import ValidationError

from atlas_pipeline.config.settings import (
    SETTING_GROUPS,
    SETTINGS,
    AtlasSettings,
    SettingsError,
    describe_settings,
    load_settings,
)


def test_defaults_resolve_to_absolute_local_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings({})
    assert settings.project.knowledge_base == str(tmp_path / "seeds" / "knowledge_base")
    assert settings.project.artifacts == str(tmp_path / "var" / "artifacts")
    assert settings.project.exports == str(tmp_path / "var" / "exports")
    assert settings.project.rule == "default"
    assert settings.parsing.ocr is True
    assert Path(settings.project.seeds_dir, "templates", "rct_base.json").is_file()


def test_urls_are_kept_as_they_are():
    settings = load_settings({"ATLAS_KNOWLEDGE_BASE": "s3://bucket/papers/"})
    assert settings.project.knowledge_base == "s3://bucket/papers"


@pytest.mark.parametrize(
    ("variable", "value", "complaint"),
    [
        ("ATLAS_SENSOR_INTERVAL_SECONDS", "soon", "valid integer"),
        ("ATLAS_SENSOR_INTERVAL_SECONDS", "0", "greater than or equal to 1"),
        ("ATLAS_OCR", "perhaps", "valid boolean"),
        ("ATLAS_PDF_ENGINE", "docling", "'auto', 'layout' or 'legacy'"),
        ("ATLAS_KNOWLEDGE_BASE", "  ", "must not be empty"),
    ],
)
def test_invalid_settings_name_the_variable(variable, value, complaint):
    with pytest.raises(SettingsError) as raised:
        load_settings({variable: value})
    message = str(raised.value)
    assert variable in message
    assert complaint in message


def test_a_parsing_provider_chosen_without_its_address_stops_at_start_up():
    with pytest.raises(SettingsError, match="ATLAS_PARSER/ATLAS_TABLES_PARSER is docling but ATLAS_DOCLING_URL"):
        load_settings({"ATLAS_PARSER": "docling"})
    with pytest.raises(SettingsError, match="ATLAS_PARSER/ATLAS_TABLES_PARSER is mineru but ATLAS_MINERU_URL"):
        load_settings({"ATLAS_TABLES_PARSER": "mineru"})
    with pytest.raises(SettingsError, match="the hosted MinerU API needs ATLAS_MINERU_TOKEN"):
        load_settings(
            {"ATLAS_PARSER": "mineru", "ATLAS_MINERU_URL": "https://mineru.net", "ATLAS_MINERU_API": "hosted"}
        )
    with pytest.raises(SettingsError, match=r"ATLAS_MINERU_URL='gpu:8000': .*not an http"):
        load_settings({"ATLAS_PARSER": "mineru", "ATLAS_MINERU_URL": "gpu:8000"})
    with pytest.raises(SettingsError, match=r"ATLAS_MINERU_TOKEN='\*\*\*'"):
        load_settings({"ATLAS_MINERU_TOKEN": 123})
    settings = load_settings({"ATLAS_PARSER": "mineru", "ATLAS_MINERU_URL": "http://gpu-host:8000/"})
    assert settings.providers.mineru_url == "http://gpu-host:8000"


def test_every_setting_is_in_exactly_one_group():
    listed = [name for _, names in SETTING_GROUPS.values() for name in names]
    assert len(listed) == len(set(listed)) == len(SETTINGS) == 85, "a setting in no group, in two, or one that is gone"
    assert [row.group for row in describe_settings()][:1] == ["project"]
    for name, setting in SETTINGS.items():  # each group's model holds its settings under their ATLAS_* names
        assert AtlasSettings.model_fields[setting.group].annotation.model_fields[setting.attribute].alias == name


def test_the_groups_are_typed_models_read_from_the_flat_variables():
    settings = load_settings(
        {"ATLAS_LLM_CONCURRENCY": "3", "ATLAS_REVIEW_INBOX": "inbox", "ATLAS_SOURCES": "", "ATLAS_REVIEWER": "ana"}
    )
    assert settings.llm.concurrency == 3 and settings.value("llm_concurrency") == 3
    assert settings.review.inbox == str(Path("inbox").resolve()) and settings.review.reviewer == "ana"
    assert settings.updated(llm_concurrency=5).llm.concurrency == 5 and settings.llm.concurrency == 3
    with pytest.raises(SettingsError, match="ATLAS_LLM_CONCURRENCY='0'"):
        load_settings({"ATLAS_LLM_CONCURRENCY": "0"})
    with pytest.raises(ValidationError):  # a change is validated like a variable
        settings.updated(llm_concurrency=0)


def test_a_misspelt_setting_is_warned_once_a_command(tmp_path, monkeypatch, capsys):
    """`atlas run` reads the settings twice (its definitions, then itself): the misspelling is still named once."""
    from atlas_pipeline.cli import show_settings
    from atlas_pipeline.cli.main import main

    def read_twice():
        load_settings()
        return load_settings()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATLAS_KNOWLEDGEBASE", str(tmp_path))
    monkeypatch.setattr(show_settings, "load_settings", read_twice)
    assert main(["settings"]) == 0
    assert capsys.readouterr().err.count("ATLAS_KNOWLEDGEBASE is not an Atlas setting") == 1
