"""Saved benchmark passes are tagged with the code they came from."""

from __future__ import annotations

import subprocess

from benchmarks.revision import code_version


def test_a_dirty_tree_is_named_by_its_change(tmp_path):
    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "f.py").write_text("x = 1\n")
    git("add", "f.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    clean = code_version(tmp_path)
    assert len(clean) >= 7 and "dirty" not in clean
    (tmp_path / "f.py").write_text("x = 2\n")
    one = code_version(tmp_path)
    (tmp_path / "f.py").write_text("x = 3\n")
    other = code_version(tmp_path)
    assert one.startswith(clean + "-dirty-") and other.startswith(clean + "-dirty-")
    assert one != other  # other edits: another name
    (tmp_path / "f.py").write_text("x = 2\n")
    assert code_version(tmp_path) == one  # the same edit: the same name


def test_a_tree_version_names_only_its_paths(tmp_path):
    from benchmarks.revision import tree_version

    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    def commit(msg):
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", msg)

    git("init", "-q")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "f.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("one\n")
    commit("one")
    first = tree_version("code", repo=tmp_path)
    (tmp_path / "README.md").write_text("two\n")
    commit("two")
    assert tree_version("code", repo=tmp_path) == first  # another commit, the same code
    (tmp_path / "code" / "f.py").write_text("x = 2\n")
    dirty = tree_version("code", repo=tmp_path)
    assert dirty != first  # an uncommitted change to the code: another name
    commit("three")
    assert tree_version("code", repo=tmp_path) not in (first, dirty)
