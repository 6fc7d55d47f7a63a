import pytest

from atlas_pipeline.store.files import Store, StoreError


def test_round_trip_and_atomic_replace(tmp_path):
    store = Store(str(tmp_path / "store"))
    location = store.write_json("a/b/record.json", {"x": 1})
    assert location == str(tmp_path / "store" / "a" / "b" / "record.json")
    store.write_json("a/b/record.json", {"x": 2})
    assert store.read_json("a/b/record.json") == {"x": 2}
    assert not [p for p in (tmp_path / "store" / "a" / "b").iterdir() if p.name.startswith(".tmp-")]
    assert store.read_json_or("missing.json", "fallback") == "fallback"


@pytest.mark.parametrize("escape", ["../outside.json", "a/../../outside.json", "/etc/passwd"])
def test_paths_cannot_escape_the_store(tmp_path, escape):
    store = Store(str(tmp_path / "store"))
    with pytest.raises(StoreError, match="outside the store"):
        store.write_text(escape, "x")
    assert not (tmp_path / "outside.json").exists()


def test_versions_change_with_every_write_and_are_read_without_reading(tmp_path):
    store = Store(str(tmp_path))
    store.write_json("documents/a/parse.json", {"n": 1})
    store.write_json("documents/a/b/parse.json", {"n": 1})  # a key with a slash: its own folder
    (tmp_path / "documents" / "a" / ".tmp-half").write_bytes(b"x")  # a write under way is not a version
    first = store.versions("documents")
    assert set(first) == {"documents/a/parse.json", "documents/a/b/parse.json"}
    store.write_json("documents/a/parse.json", {"n": 1})  # the same bytes again: a new version all the same
    second = store.versions("documents")
    assert second["documents/a/parse.json"] != first["documents/a/parse.json"]
    assert second["documents/a/b/parse.json"] == first["documents/a/b/parse.json"]
    assert store.versions("nothing/here") == {}
