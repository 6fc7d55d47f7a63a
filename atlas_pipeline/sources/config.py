"""Sources declared as data: a TOML file (``ATLAS_SOURCES``, or ``sources.toml`` in the seeds folder) with one
``[[source]]`` table per feed or list of URLs.

::

    [[source]]
    name = "pubmed-diabetes-rcts"            # letters, digits, - and _; names the sensor (source_<name>)
    feed = "https://pubmed.ncbi.nlm.nih.gov/rss/search/…"  # an RSS or Atom feed …
    # urls = ["https://…/a.pdf", "https://…/b.pdf"]         # … or a list of document URLs
    target = "collected/pubmed"              # folder (or prefix) inside the knowledge base
    poll_minutes = 60                        # how often the feed is read (slower when the backlog is long)
    min_domain_interval_seconds = 300        # at least this long between two requests to one domain
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from atlas_pipeline.core.errors import AtlasError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


class SourcesError(AtlasError, ValueError):
    """The sources file cannot be read or declares an invalid source; the message names the file and the source."""


class Source(BaseModel):
    """One collector: where it reads, where it writes, how politely."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    feed: str = ""
    urls: tuple[str, ...] = ()
    target: str
    poll_minutes: float = Field(60.0, gt=0, le=7 * 24 * 60)
    min_domain_interval_seconds: float = Field(300.0, ge=0, le=86_400)
    max_items_per_tick: int = Field(5, ge=1, le=1000)
    timeout_seconds: float = Field(30.0, gt=0, le=600)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.match(value):
            raise ValueError("a name is letters, digits, '-' and '_' (it names a Dagster sensor)")
        return value

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        normal = posixpath.normpath(value.strip().strip("/"))
        if not value.strip() or normal in (".", "..") or normal.startswith("../"):
            raise ValueError("the target must be a folder inside the knowledge base, e.g. 'collected/pubmed'")
        return normal

    @field_validator("feed")
    @classmethod
    def _feed(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError(f"a feed is an http(s) URL, not {value!r}")
        return value

    @field_validator("urls")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [url for url in value if not url.startswith(("http://", "https://"))]
        if bad:
            raise ValueError(f"every URL must be http(s): {', '.join(map(repr, bad[:3]))}")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> Source:
        if bool(self.feed) == bool(self.urls):
            raise ValueError("declare either a feed or a list of urls")
        return self

    @property
    def kind(self) -> str:
        return "feed" if self.feed else "urls"

    @property
    def sensor_name(self) -> str:
        return "source_" + self.name.replace("-", "_").lower()


def load_sources(path: str | Path) -> list[Source]:
    """Every source of the file; ``SourcesError`` for an unreadable file, an invalid source or a repeated name."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise SourcesError(f"cannot read the sources file {path}: {error.strerror or error}") from error
    except tomllib.TOMLDecodeError as error:
        raise SourcesError(f"{path} is not valid TOML: {error}") from error
    tables = data.get("source", [])
    if not isinstance(tables, list):
        raise SourcesError(f"{path}: declare sources as [[source]] tables")
    sources: list[Source] = []
    for number, table in enumerate(tables, start=1):
        label = table.get("name", f"#{number}") if isinstance(table, dict) else f"#{number}"
        try:
            sources.append(Source.model_validate(table))
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, item['loc'])) or 'source'}: {item['msg']}" for item in error.errors()
            )
            raise SourcesError(f"{path}: source {label}: {problems}") from None
    names = [source.sensor_name for source in sources]
    repeated = sorted({s.name for s in sources if names.count(s.sensor_name) > 1})
    if repeated:
        raise SourcesError(f"{path}: source names must be unique (ignoring case, '-' and '_'): {', '.join(repeated)}")
    return sources


def sources_file(setting: str, seeds_dir: str) -> Path | None:
    """The sources file in use: ``ATLAS_SOURCES`` when set, else ``sources.toml`` in the seeds folder if present."""
    if setting:
        return Path(setting)
    default = Path(seeds_dir) / "sources.toml"
    return default if default.is_file() else None
