"""The CLI's cache of compiled dataclass methods (llmath.cli.classcache) gives the classes dataclasses itself
builds: the same code, annotations and behaviour, a changed class compiled anew, a bad file ignored, nothing
written where bytecode would not be."""

import dataclasses
import marshal
import os
import subprocess
import sys
import types

import pytest

from llmath.cli import classcache

PROBE = "llmath.classcache_probe"  # the module the classes below are defined in: one of llmath's


@pytest.fixture
def cache_file(tmp_path, monkeypatch):
    monkeypatch.setattr(classcache, "cache_path", lambda module: tmp_path / f"{module}.marshal")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setitem(sys.modules, PROBE, types.ModuleType(PROBE))
    return tmp_path / f"{PROBE}.marshal"


def _point(extra: bool = False, module: str = PROBE):
    fields = {"x": int, "y": "list[str]", **({"z": float} if extra else {})}
    ns = {"__annotations__": fields, "__module__": module, "y": None, "z": 0.0}
    return dataclasses.dataclass(frozen=True)(type("Point", (), ns))


def _methods(cls) -> dict:
    return {n: f for n, f in vars(cls).items() if callable(f) and getattr(f, "__code__", None) is not None}


def _same_class(a, b) -> None:
    ma, mb = _methods(a), _methods(b)
    assert ma.keys() == mb.keys()
    for name in ma:
        ca, cb = ma[name].__code__, mb[name].__code__
        assert ca == cb and ca.co_filename == cb.co_filename, name
        assert ma[name].__annotations__ == mb[name].__annotations__, name  # objects, not strings: no future flags
        assert ma[name].__defaults__ == mb[name].__defaults__, name


def test_cached_classes_are_the_classes_dataclasses_builds(cache_file, monkeypatch):
    plain = _point()
    with classcache.cached_dataclass_methods():
        first = _point()  # compiled, then written
    assert "exec" not in vars(dataclasses) and cache_file.exists()
    entries = marshal.loads(cache_file.read_bytes())
    assert entries and all(compile(t, "<string>", "exec", dont_inherit=True) == c for t, c in entries.items())

    def no_compile(*a, **k):
        raise AssertionError("compiled although cached")

    monkeypatch.setattr(classcache, "compile", no_compile, raising=False)
    with classcache.cached_dataclass_methods():
        second = _point()  # every method from the file
    for cls in (first, second):
        _same_class(plain, cls)
        p = cls(1, ["a"])
        assert (repr(p), p == cls(1, ["a"]), p == cls(2, ["a"])) == ("Point(x=1, y=['a'])", True, False)
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.x = 3


def test_a_changed_class_is_compiled_anew(cache_file):
    with classcache.cached_dataclass_methods():
        _point()
    with classcache.cached_dataclass_methods():
        changed = _point(extra=True)
    _same_class(_point(extra=True), changed)
    assert repr(changed(1, [], 2.5)) == "Point(x=1, y=[], z=2.5)"
    assert len(marshal.loads(cache_file.read_bytes())) > 0


def test_a_corrupt_or_foreign_file_is_ignored(cache_file):
    for content in (b"not marshal", marshal.dumps({"text": 1}), marshal.dumps([1, 2])):
        cache_file.write_bytes(content)
        with classcache.cached_dataclass_methods():
            cls = _point()
        _same_class(_point(), cls)


def test_nothing_is_written_where_bytecode_is_not(cache_file, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    with classcache.cached_dataclass_methods():
        _point()
    assert not cache_file.exists()


def test_other_packages_dataclasses_compile_as_always(cache_file, tmp_path):
    with classcache.cached_dataclass_methods():
        cls = _point(module=__name__)
    _same_class(_point(module=__name__), cls)
    assert not list(tmp_path.iterdir())


def test_the_patch_is_removed_after_an_error(cache_file):
    with pytest.raises(RuntimeError), classcache.cached_dataclass_methods():
        raise RuntimeError("boom")
    assert "exec" not in vars(dataclasses)


def test_a_command_prints_the_same_with_the_cache_written_and_read(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path)
    cmd = [sys.executable, "-m", "llmath", "analyze", "llama-3-8b", "-H", "h100-sxm", "--json"]
    plain = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120, env=os.environ | {
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(tmp_path / "none")})  # fmt: skip
    writes = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120, env=env)
    files = sorted(tmp_path.rglob("llmath.*.dataclasses.marshal"))
    assert {f.name.split(".cpython")[0] for f in files} >= {"llmath.model.spec", "llmath.analysis", "llmath.ops.core"}
    entries = [marshal.loads(f.read_bytes()) for f in files]
    assert sum(map(len, entries)) > 50  # the library's dataclasses on this path
    assert all(compile(t, "<string>", "exec", dont_inherit=True) == c for e in entries for t, c in e.items())
    stamps = [f.stat().st_mtime_ns for f in files]
    reads = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120, env=env)
    assert [f.stat().st_mtime_ns for f in files] == stamps  # nothing new to write
    assert plain.stdout == writes.stdout == reads.stdout
