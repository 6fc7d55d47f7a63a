"""A review is a folder: its settings in one small ``atlas.toml``, its state (instance, artifacts, exports, decisions,
accounts) inside it, so several reviews live side by side and the sample never mixes into one's own.

``atlas init DIR`` writes the file; ``atlas`` run in the folder (or below it), with ``--review DIR`` or with
``ATLAS_REVIEW=DIR`` works on that review alone. Settings come from, strongest first: ``ATLAS_*`` variables, the
file's ``[settings]`` table (relative paths from the folder), the review's own state folders, the built-in defaults.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atlas_pipeline.core.errors import AtlasError

REVIEW_FILE = "atlas.toml"
REVIEW_VARIABLE = "ATLAS_REVIEW"
STATE = "state"
# settings that name a file or folder: a relative one in the review file is taken from the review folder
PATH_SETTINGS = frozenset(
    {
        "knowledge_base",
        "artifacts",
        "exports",
        "seeds_dir",
        "instance_config",
        "executor_config",
        "sources",
        "search_sqlite",
        "llm_prices",
        "llm_gate_dir",
        "review_users",
        "review_inbox",
        "gold",
    }
)


class ReviewFolderError(AtlasError, ValueError):
    """A review folder that cannot be used (no ``atlas.toml``, a file that is not TOML, an unknown setting)."""


@dataclass(frozen=True)
class ReviewFolder:
    """One review's folder and the settings its ``atlas.toml`` gives."""

    root: Path
    settings: dict[str, str] = field(default_factory=dict)  # setting name → value, relative paths resolved
    dagster_home_setting: str = ""

    @property
    def file(self) -> Path:
        return self.root / REVIEW_FILE

    @property
    def dagster_home(self) -> Path:
        """The review's own Dagster instance (``[review] dagster_home`` to put it elsewhere)."""
        return Path(self.dagster_home_setting) if self.dagster_home_setting else self.root / STATE / "dagster_home"

    def defaults(self) -> dict[str, str]:
        """Where the review keeps its state unless its file says otherwise."""
        state = self.root / STATE
        return {
            "artifacts": str(state / "artifacts"),
            "exports": str(self.root / "exports"),
            "review_users": str(state / "review_users.json"),
            "knowledge_base": str(self.root / "knowledge_base"),
        }

    def setting_values(self) -> dict[str, str]:
        """Setting name → value for this review, before the ``ATLAS_*`` variables (which win)."""
        return self.defaults() | self.settings


def find_review(
    environ: Mapping[str, str] | None = None, cwd: Path | None = None, known: frozenset[str] | None = None
) -> ReviewFolder | None:
    """The review in effect: ``ATLAS_REVIEW``, else the nearest folder from ``cwd`` upwards holding ``atlas.toml``;
    None outside any review (the repository's sample, or settings given by variables alone). ``known``: the setting
    names, to refuse a misspelt one (``load_settings`` passes them)."""
    env = os.environ if environ is None else environ
    named = env.get(REVIEW_VARIABLE, "").strip()
    if named:
        root = Path(named).expanduser().resolve()
        if root.name == REVIEW_FILE:
            root = root.parent
        if not (root / REVIEW_FILE).is_file():
            raise ReviewFolderError(
                f"{REVIEW_VARIABLE}={named!r}: no {REVIEW_FILE} there — start a review with `atlas init {named}`"
            )
        return load_review(root, known)
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / REVIEW_FILE).is_file() and _is_review_file(folder / REVIEW_FILE):
            return load_review(folder, known)
    return None


def _is_review_file(path: Path) -> bool:
    """An ``atlas.toml`` with a ``[settings]`` table: another tool's file of that name higher up is not a review."""
    try:
        return isinstance(tomllib.loads(path.read_text(encoding="utf-8")).get("settings"), dict)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True  # a review file with a mistake: load_review says what is wrong


def load_review(root: Path, known: frozenset[str] | None = None) -> ReviewFolder:
    """Read ``root/atlas.toml``: its ``[settings]`` (names as in ``atlas settings``, lower case without ``ATLAS_``)
    and ``[review] dagster_home``. ``known``: the setting names, to refuse a misspelt one with the closest (None:
    taken as written — the settings refuse it when they are loaded)."""
    path = root / REVIEW_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ReviewFolderError(f"{path}: not a readable review file: {error}") from None
    section = data.get("settings", {})
    if not isinstance(section, dict):
        raise ReviewFolderError(f"{path}: [settings] must be a table of setting = value")
    settings = {}
    for name, value in section.items():
        key = name.lower().removeprefix("atlas_")
        if known is not None and key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ReviewFolderError(
                f"{path}: [settings] {name} is not an Atlas setting{hint}; `atlas settings` lists them"
            )
        settings[key] = _setting_text(root, key, value, path)
    review = data.get("review", {})
    home = str(review.get("dagster_home", "")).strip() if isinstance(review, dict) else ""
    return ReviewFolder(root=root, settings=settings, dagster_home_setting=_local_path(root, home) if home else "")


def _setting_text(root: Path, name: str, value: Any, path: Path) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str | int | float):
        raise ReviewFolderError(f"{path}: [settings] {name} must be a string, number or true/false")
    text = str(value)
    return _local_path(root, text) if name in PATH_SETTINGS and text.strip() else text


def _local_path(root: Path, text: str) -> str:
    """A relative local path from the review folder (``~`` expanded); URLs (``s3://…``) as they are."""
    if "://" in text and not text.startswith("file://"):
        return text
    local = Path(text.removeprefix("file://")).expanduser()
    return str(local if local.is_absolute() else (root / local).resolve())


REVIEW_TEMPLATE = """\
# An Atlas review. `atlas run` in this folder (or `atlas --review {root} run`) works on this review alone:
# its instance, artifacts and accounts live in state/, its exports in exports/.
# Settings here are named as `atlas settings` lists them, in lower case without ATLAS_ (an ATLAS_* variable still
# wins); relative paths are taken from this folder. Keep API keys in the environment (ATLAS_LLM_API_KEY), not here.

[settings]
knowledge_base = {knowledge_base}  # the documents: a folder or an s3:// prefix
rule = {rule}  # a rule of seeds/rules/: the template and the extraction mode
# seeds_dir = "seeds"  # a folder with rules/ and templates/ of this review's own
# llm_base_url = "https://api.openai.com/v1"  # LLM mode (any OpenAI-compatible endpoint)
# llm_model = "gpt-4o-mini"
# review_extractors = 2  # people who extract each document independently
"""


def init_review(root: Path, knowledge_base: str = "", rule: str = "default") -> ReviewFolder:
    """Start a review in ``root``: its ``atlas.toml`` and state folders (an existing review is never overwritten)."""
    root = root.expanduser().resolve()
    if (root / REVIEW_FILE).exists():
        raise ReviewFolderError(f"{root} is already a review ({REVIEW_FILE} there): run `atlas run` in it")
    if root.exists() and not root.is_dir():
        raise ReviewFolderError(f"{root} is a file, not a folder")
    location = knowledge_base.strip() or "knowledge_base"
    if knowledge_base.strip() and ("://" not in location or location.startswith("file://")):
        local = Path(_local_path(Path.cwd(), location))  # as typed: from where the command runs
        if not local.is_dir():
            raise ReviewFolderError(f"--knowledge-base {knowledge_base}: no such folder")
        location = str(local)
    root.mkdir(parents=True, exist_ok=True)
    for folder in (root / STATE, root / "exports"):
        folder.mkdir(exist_ok=True)
    if location == "knowledge_base":
        (root / "knowledge_base").mkdir(exist_ok=True)
    text = REVIEW_TEMPLATE.format(root=root, knowledge_base=json.dumps(location), rule=json.dumps(rule))
    (root / REVIEW_FILE).write_text(text, encoding="utf-8")
    return load_review(root)
