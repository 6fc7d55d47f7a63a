"""The documentation: the README fits on a screen with the two commands first, the site in docs/ builds strictly
(every link and anchor resolves), and docs/configuration.md documents every setting and nothing else."""

import os
import re
import subprocess
import sys
from pathlib import Path

from atlas_pipeline.config.settings import PROJECT_ROOT, describe_settings

MKDOCS = Path(sys.executable).with_name("mkdocs")


def test_the_readme_fits_on_a_screen_and_starts_with_the_two_commands():
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    first_block = readme.split("```")[1]
    assert re.findall(r"^make (\w+)", first_block, re.MULTILINE) == ["run", "test"]
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):  # GitHub shows the README: its links go to files
        assert (PROJECT_ROOT / link).is_file(), link


def test_the_documentation_site_builds_strictly(tmp_path):
    """MkDocs in strict mode: a page missing from the navigation, a broken link or a missing anchor fails."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()

    broken = tmp_path / "docs"  # the same check fails on a planted broken anchor
    subprocess.run(["cp", "-r", str(PROJECT_ROOT / "docs"), str(broken)], check=True)
    (broken / "library.md").write_text((broken / "library.md").read_text() + "\n[x](review.md#no-such-section)\n")
    config = (PROJECT_ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {broken}")
    (tmp_path / "mkdocs.yml").write_text(config)
    failed = subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(tmp_path / "mkdocs.yml"), "--site-dir", str(tmp_path / "s2")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert failed.returncode != 0 and "no-such-section" in failed.stdout + failed.stderr


def test_the_configuration_page_lists_every_setting_and_no_other():
    page = (PROJECT_ROOT / "docs" / "configuration.md").read_text()
    rows = re.findall(r"^\| `(ATLAS_[A-Z0-9_]+)` \|", page, re.MULTILINE)
    settings = [row.variable for row in describe_settings()]
    assert sorted(set(settings) - set(rows)) == [], "settings missing from docs/configuration.md"
    assert sorted(set(rows) - set(settings)) == [], "rows for settings that do not exist"
    sections = re.split(r"^## ", page, flags=re.MULTILINE)[1:]
    documented = {
        variable: section.split("\n", 1)[0].strip().lower()
        for section in sections
        for variable in re.findall(r"^\| `(ATLAS_[A-Z0-9_]+)` \|", section, re.MULTILINE)
    }
    assert {row.variable: row.group for row in describe_settings()} == documented, "a setting under another group"


def test_every_export_file_is_named_where_the_outputs_are_described():
    """The registry of export files (``outputs.export_files``) and docs/how-it-works.md name the same files: a file
    added to the exports is described, a file described is written."""
    import re

    from atlas_pipeline.outputs.export_files import EXPORTS

    text = (PROJECT_ROOT / "docs" / "how-it-works.md").read_text()
    while match := re.search(r"(\w*)\{([\w,]+)\}", text):  # atlas_escalc_{dichotomous,continuous} → each name
        names = " <exports>/".join(match.group(1) + part for part in match.group(2).split(","))
        text = text[: match.start()] + names + text[match.end() :]
    named = set(re.findall(r"<exports>/(atlas_\w+)", text))
    assert named == {file.stem for file in EXPORTS}
