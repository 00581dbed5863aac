"""The mutation check runs in CI: every deliberate mutation (kernel or host module) turns its slice red."""

import concurrent.futures
import dataclasses
import importlib.util
import pathlib
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "mutation_check.py"
spec = importlib.util.spec_from_file_location("mutation_check", SCRIPT)
mutation_check = importlib.util.module_from_spec(spec)
sys.modules["mutation_check"] = mutation_check  # dataclasses look their module up there
spec.loader.exec_module(mutation_check)


def test_every_mutation_finds_its_site_and_snippet_once():
    """Each mutation's anchor (its site's one definition in kernels/, or its host file, holding the
    snippet once) resolves, so no run below fails for a moved line rather than a caught bug."""
    for mutation in mutation_check.MUTATIONS:
        path, start, end = mutation_check.locate(mutation, mutation_check.KERNELS, mutation_check.ROOT)
        assert mutation_check.snippet_pattern(mutation.original).fullmatch(path.read_text()[start:end]), mutation.name


def test_anchors_survive_moved_and_rewrapped_code(tmp_path):
    """An anchor names a function, not a file or a line: the function moved to another file and its
    snippet re-wrapped and re-indented still resolve, to the snippet's new place."""
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "a.hpp").write_text("constexpr uint32_t kOther = 3;\n")
    (kernels / "b.cpp").write_text("// moved here\nuint32_t f(uint32_t x) {\n  return x\n      + kOther;\n}\n"
                                   "uint32_t g() { return f(1) + kOther; }\n")
    moved = mutation_check.Mutation("m", "f", "return x + kOther;", "return x;", "")
    path, start, end = mutation_check.locate(moved, kernels, tmp_path)
    assert path.name == "b.cpp" and path.read_text()[start:end] == "return x\n      + kOther;"
    with pytest.raises(SystemExit, match="expected its snippet once"):
        mutation_check.locate(dataclasses.replace(moved, site="g"), kernels, tmp_path)


@pytest.fixture(scope="module")
def mutation_results():
    """Every mutation's (caught, seconds, tail), run two at a time: each run is its own pytest
    subprocess on its own mutated kernel copy (emulator builds are atomic renames), so two share the
    machine's two cores without sharing state. Started on first use, read by each test."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {m.name: pool.submit(mutation_check.run, m) for m in mutation_check.MUTATIONS}
        yield futures


@pytest.mark.parametrize("mutation", mutation_check.MUTATIONS, ids=lambda m: m.name)
def test_mutation_turns_attention_tests_red(mutation, mutation_results, record_property):
    caught, seconds, tail = mutation_results[mutation.name].result()
    record_property("figure", f"mutation {mutation.name}: {'caught' if caught else 'MISSED'} in {seconds:.1f}s")
    assert caught, f"mutation {mutation.name} ({mutation.bug}) left the attention tests green:\n{tail}"


def test_mutation_slice_passes_on_the_real_kernels():
    """Without this, a slice that always fails would 'catch' every mutation."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TTNN_FLASHDECODE_KERNEL_DIR"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *mutation_check.TEST_SLICE],
                            cwd=SCRIPT.parent.parent, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


_OWN_SLICES = {(tuple(m.slice), m.host): m for m in mutation_check.MUTATIONS if m.tests}


def _unmutated_params():
    """One kernel and one host mutation in CI (the copy mechanism: a kernel copy, an importable package
    copy); the rest in the long sweep (about 5 s each on an idle machine; CI's 25 minutes). CI runs
    those slices as ordinary tests on the real kernels anyway."""
    first_kernel = next(m for m in _OWN_SLICES.values() if not m.host)
    first_host = next(m for m in _OWN_SLICES.values() if m.host)
    return [pytest.param(m, id=f"{m.name}-unmutated", marks=() if m in (first_kernel, first_host) else pytest.mark.long_sweep)
            for m in _OWN_SLICES.values()]


@pytest.mark.parametrize("mutation", _unmutated_params())
def test_mutation_own_slice_passes_unmutated(mutation):
    """A mutation's own slice is green on the copy with the edit undone (for a host mutation, the
    copied package really is importable from the temporary folder), so its red is the edit's (which
    of them CI runs: _unmutated_params)."""
    import dataclasses

    caught, seconds, tail = mutation_check.run(dataclasses.replace(mutation, mutated=mutation.original))
    assert not caught and " passed" in tail and " failed" not in tail, tail
