"""The data sets shipped inside the package (resrl/data/packaged/math): every name loads from the
packaged copy with its row count and sha256; a damaged or missing packaged file gives one
DataError naming it; an explicit --data-dir / $RESRL_DATA_DIR wins; no code or test looks for the
data outside the package (issue 18: a clone with nothing beside it must pass)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from resrl.data import packaged_data
from resrl.data.loaders import BENCHMARKS, resolve_data_path
from resrl.tasks.data import load_benchmarks, load_problems
from resrl.errors import DataError

REPO = Path(__file__).resolve().parents[1]
# rows and sha256 of the decompressed .jsonl content, copied from the table of the data's source
# README (quoted in resrl/data/packaged/math/PROVENANCE.md) — independent of the package's manifest
EXPECTED = {
    "aime24": (30, "e89df84e185999e840eea49eb07e5b88752455a72803a22703814b6d297932d5"),
    "aime25": (30, "eb17e25133aebe01d600506e06ab9df9c39ed7fdced6cca0ab2ade0feee357f3"),
    "amc23": (40, "a61b55d7dc6fb1ead4256e438d45e0204c4a3666d2a351667c8214f8f32f8c12"),
    "math500": (500, "f8a74828b575fd832b027c367a50ff64d21aef938dcec1ef4b9f3d2f7ce4ecbc"),
    "minerva": (272, "893e9ac3a1eab46a09032dfcac1e91e07c689253772b83fbbc5292df71bb101a"),
    "olympiadbench": (675, "fef9bdc7c210ac60306c03428aaf5dab5f1d83d9f5b7048b8e472afcc64dd2d2"),
    "gsm8k": (1319, "122ffcb19837643ebcf557f0425173eb41fa2531bf6c1b5ba3bb082cf4c2d0d9"),
    "dapo_math_17k": (17917, "6bca34d38bbd8b6a4ab538aef0954698670c989eadfe60cb760a3b5630ad858e"),
    "dapo_math_17k_dedup": (17240, "549bac6d65f3d9fd6754eed09c8f57e3d75e3910a4a905d7bfaaff7c44db6d51"),
}


@pytest.fixture(autouse=True)
def _no_data_dir_env(monkeypatch):
    monkeypatch.delenv("RESRL_DATA_DIR", raising=False)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_benchmark_loads_from_the_packaged_copy(name):
    rows, sha = EXPECTED[name]
    entry = resolve_data_path(name)
    assert isinstance(entry, packaged_data.PackagedFile), entry  # really the packaged copy
    assert entry.rows == rows and entry.sha256 == sha  # the manifest agrees with the source README
    content = gzip.decompress(entry.file.read_bytes())  # sha256 recomputed here, not trusted
    assert hashlib.sha256(content).hexdigest() == sha
    problems = load_problems(name)
    assert len(problems) == rows
    assert {p.data_source for p in problems} == {name}
    assert all(isinstance(p.prompt, str) and p.prompt.strip() and p.answer for p in problems)


def test_names_and_manifest_agree():
    assert set(BENCHMARKS) == set(EXPECTED) == set(packaged_data.packaged_names())
    math_dir = REPO / "src" / "resrl" / "data" / "packaged" / "math"
    on_disk = {p.name.removesuffix(".jsonl.gz") for p in math_dir.glob("*.jsonl.gz")}
    assert on_disk == set(EXPECTED)
    assert (math_dir / "PROVENANCE.md").is_file() and any((math_dir / "LICENSES").iterdir())


# ---- damaged packages (always a temporary copy: the real package files are never touched) -------
@pytest.fixture
def copy_root(tmp_path, monkeypatch):
    """A copy of data/packaged/math under tmp_path, made the loader's packaged root."""
    src = packaged_data.packaged_root().joinpath("math")
    dst = tmp_path / "packaged" / "math"
    dst.mkdir(parents=True)
    for name in ("manifest.json", "aime24.jsonl.gz", "amc23.jsonl.gz"):
        (dst / name).write_bytes(src.joinpath(name).read_bytes())
    monkeypatch.setattr(packaged_data, "packaged_root", lambda: tmp_path / "packaged")
    assert len(load_problems("amc23")) == 40  # the untouched copy loads
    return dst


def _damage_content(path: Path) -> None:
    """A valid gzip whose content differs from the manifest's by one answer."""
    text = gzip.decompress(path.read_bytes()).decode()
    row = json.loads(text.splitlines()[0])
    row["answer"] = str(int(row["answer"]) + 1)
    lines = [json.dumps(row, ensure_ascii=False)] + text.splitlines()[1:]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.unlink(), "is missing"),
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "not a complete gzip file"),
    (lambda p: p.write_bytes(b"not gzip at all\n"), "not a complete gzip file"),
    (_damage_content, "sha256 of its content is"),
])
def test_damaged_packaged_file_gives_one_error_naming_it(copy_root, damage, message):
    damage(copy_root / "aime24.jsonl.gz")
    with pytest.raises(DataError, match=message) as info:
        load_problems("aime24")
    assert "resrl package data math/aime24.jsonl.gz" in str(info.value)
    assert "RESRL_DATA_DIR" in str(info.value)  # says how to get around it
    with pytest.raises(DataError, match="aime24.jsonl.gz"):
        load_benchmarks(["amc23", "aime24"])
    assert len(load_problems("amc23")) == 40  # the other files still load


def test_missing_or_corrupted_manifest_is_named(copy_root):
    (copy_root / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match=r"math/manifest.json is corrupted"):
        load_problems("aime24")
    (copy_root / "manifest.json").unlink()
    with pytest.raises(DataError, match=r"math/manifest.json is missing"):
        load_problems("aime24")


# ---- resolution order ------------------------------------------------------------------------------
def test_explicit_data_dir_and_env_win_over_the_packaged_copy(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "aime24.jsonl").write_text(json.dumps({"problem": "my own 1+1?", "answer": "2"}) + "\n")
    (p,) = load_problems("aime24", data_dir=mine)
    assert p.prompt == "my own 1+1?"
    monkeypatch.setenv("RESRL_DATA_DIR", str(mine))
    assert [p.prompt for p in load_problems("aime24")] == ["my own 1+1?"]
    # a name the explicit directory lacks falls back to the packaged copy
    assert len(load_problems("amc23", data_dir=mine)) == 40
    # --data-dir beats $RESRL_DATA_DIR
    other = tmp_path / "other"
    other.mkdir()
    with gzip.open(other / "aime24.jsonl.gz", "wt") as f:
        f.write(json.dumps({"problem": "other 2+2?", "answer": 4}) + "\n")
    assert [p.prompt for p in load_problems("aime24", data_dir=other)] == ["other 2+2?"]


def test_packaged_data_loads_from_a_zip_import(tmp_path):
    """importlib.resources, not file paths: the package imported from a zip reads its data."""
    archive = tmp_path / "resrl.zip"
    src = REPO / "src"
    with zipfile.ZipFile(archive, "w") as z:
        for f in (src / "resrl").rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts:
                z.write(f, f.relative_to(src).as_posix())
    code = ("import resrl, sys; from resrl.tasks.data import load_problems; "
            "assert resrl.__file__.startswith(sys.argv[1]), resrl.__file__; "
            "print(len(load_problems('aime24')), len(load_problems('gsm8k', limit=3)))")
    out = subprocess.run([sys.executable, "-c", code, str(archive)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={"PYTHONPATH": str(archive), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["30", "3"]


def test_no_code_or_test_looks_for_data_beside_the_checkout():
    """No path to a shared data folder beside the checkout, in any spelling (a slash-joined string,
    pathlib's / operator, comma-separated parts, or the parent directory's folder)."""
    pattern = re.compile(r"""shared['"]?\s*[/,]\s*['"]?data|\.\./+shared""")
    found = []
    for root in ("src", "tests", "scripts", "configs", "examples", "benchmarks", ".ci"):
        for f in (REPO / root).rglob("*"):
            if f.is_file() and f.suffix in (".py", ".sh", ".yaml", ".yml", ".toml", ".cfg", "") \
                    and "__pycache__" not in f.parts and not any(p.endswith(".egg-info") for p in f.parts):
                found += [f"{f.relative_to(REPO)}: {m.group(0)}" for m in pattern.finditer(f.read_text(errors="replace"))]
    assert not found, found


@pytest.mark.skipif(not os.environ.get("RESRL_CI_ISOLATED"), reason="only in CI's isolated clone (.ci/run)")
def test_ci_runs_in_a_clone_with_nothing_beside_it():
    """.ci/run re-runs itself in a fresh clone inside a new temp directory: the checkout's parent
    holds the checkout alone, so a lookup beside the checkout cannot find any data."""
    beside = sorted(p.name for p in REPO.parent.iterdir())
    assert beside == [REPO.name], beside
