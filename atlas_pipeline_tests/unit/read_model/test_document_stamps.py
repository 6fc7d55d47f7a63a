"""A document's stamp changes with anything its state is built from, and with nothing else."""

from atlas_pipeline.core.document_status import RunFacts
from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry
from atlas_pipeline.read_model.document_stamps import document_stamps, record_versions, settings_stamp
from atlas_pipeline.store.files import Store


def _entry(key: str, **changes) -> CatalogEntry:
    values = {"key": key, "source_path": key, "sha256": "ab" * 32, "size": 1, "marker": "m", "first_seen": "t"}
    return CatalogEntry(**{**values, "updated": "t", **changes})


def test_a_stamp_follows_what_a_state_is_built_from(tmp_path):
    store = Store(str(tmp_path))
    for key in ("a", "a/b", "c"):
        store.write_json(f"documents/{key}/extraction.json", {"key": key})
    versions = record_versions(store)
    assert sorted(versions) == ["a", "a/b", "c"] and all(len(files) == 1 for files in versions.values())
    catalog = Catalog(entries={key: _entry(key) for key in ("a", "a/b", "c")})
    runs = {key: RunFacts(extracted=True) for key in ("a", "a/b", "c")}
    settings = settings_stamp("version-1", "policy-1")

    def stamps(**changed):
        given = {"versions": record_versions(store), "marks": {}, "runs": runs, "catalog": catalog, **changed}
        return document_stamps(
            ["a", "a/b", "c"], given["versions"], given["marks"], given["runs"], given["catalog"],
            changed.get("settings", settings),
        )  # fmt: skip

    first = stamps()
    assert stamps() == first  # nothing changed: the same stamps
    store.write_json("documents/a/review.json", {"key": "a"})
    assert [k for k, v in stamps().items() if v != first[k]] == ["a"]  # a record of a written
    after = stamps()
    assert [k for k, v in stamps(marks={"c": "1-x"}).items() if v != after[k]] == ["c"]  # a decision on c
    running = {**runs, "a/b": RunFacts(running=True)}
    assert [k for k, v in stamps(runs=running).items() if v != after[k]] == ["a/b"]  # a run at work on a/b
    moved = Catalog(entries={**catalog.entries, "c": _entry("c", removed=True)})
    assert [k for k, v in stamps(catalog=moved).items() if v != after[k]] == ["c"]  # its source removed
    touched = Catalog(entries={**catalog.entries, "c": _entry("c", updated="later", marker="n")})
    assert stamps(catalog=touched) == after  # a rescan that changed nothing a state reads
    assert all(v != after[k] for k, v in stamps(settings=settings_stamp("version-2", "policy-1")).items())
