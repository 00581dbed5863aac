"""The wheel carries everything a non-editable install needs: kernel sources under
``ttnn_flashdecode/kernels/`` and the emulator's C++ ``include/`` and ``src/`` trees."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
# What a wheel is built from (everything else in the checkout is not packaged).
SOURCES = ["pyproject.toml", "setup.py", "README.md", "ttnn_flashdecode", "kernels"]
KERNEL_PATTERNS = ("*.cpp", "*.hpp", "*.h")


def _files(root: pathlib.Path, patterns=("*",)) -> set[str]:
    """Files under ``root`` matching any pattern, as POSIX paths relative to ``root``."""
    found = set()
    for pattern in patterns:
        for path in root.rglob(pattern):
            if path.is_file() and "__pycache__" not in path.parts:
                found.add(path.relative_to(root).as_posix())
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    """Build the project's wheel from a copy of the sources (the checkout stays clean)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.o"))
        else:
            shutil.copy2(origin, src / name)
    out = work / "dist"
    # --no-build-isolation: use this venv's setuptools (the `test` extra) instead of
    # downloading one into a fresh build environment.
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out), "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"pip wheel failed:\n{result.stdout}\n{result.stderr}"
    wheels = list(out.glob("ttnn_flashdecode-*.whl"))
    assert len(wheels) == 1, f"expected one ttnn_flashdecode wheel, got {wheels}"
    return wheels[0]


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_wheel_contains_kernel_sources(wheel_names):
    kernels = _files(REPO / "kernels", KERNEL_PATTERNS)
    assert kernels, "expected kernel sources (*.cpp, *.hpp, *.h) in kernels/, found none"
    missing = sorted({f"ttnn_flashdecode/kernels/{name}" for name in kernels} - wheel_names)
    assert not missing, f"kernel sources missing from the wheel: {missing}"


def test_wheel_contains_emulator_cpp_tree(wheel_names):
    emulator = REPO / "ttnn_flashdecode" / "emulator"
    expected = {f"include/{name}" for name in _files(emulator / "include")}
    if (emulator / "src").is_dir():
        expected |= {f"src/{path.name}" for path in (emulator / "src").iterdir() if path.is_file()}
    assert any(name.startswith("include/") for name in expected), "expected emulator headers in emulator/include/"
    missing = sorted({f"ttnn_flashdecode/emulator/{name}" for name in expected} - wheel_names)
    assert not missing, f"emulator C++ files missing from the wheel: {missing}"


def test_wheel_contains_the_silicon_check_data(wheel_names):
    """The silicon check's compiler wrapper and stand-in headers ship too, and the op's mock
    cluster descriptors (host block-float packing without a card needs one)."""
    folder = REPO / "ttnn_flashdecode" / "tools" / "silicon_check"
    data = {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file() and path.suffix not in (".py", ".pyc")}
    assert "riscv-tt-elf-g++" in data
    missing = sorted({f"ttnn_flashdecode/tools/silicon_check/{name}" for name in data} - wheel_names)
    clusters = {f"ttnn_flashdecode/op/mock_clusters/{name}.yaml" for name in ("wormhole_b0", "blackhole", "t3k")}
    missing += sorted(clusters - wheel_names)
    assert not missing, f"silicon check files missing from the wheel: {missing}"


def test_wheel_contains_every_python_module(wheel_names):
    modules = _files(REPO / "ttnn_flashdecode", ("*.py",))
    missing = sorted({f"ttnn_flashdecode/{name}" for name in modules} - wheel_names)
    assert not missing, f"Python modules missing from the wheel (a package without __init__.py?): {missing}"


def test_wheel_metadata_names_distribution_and_dependencies(wheel, wheel_names):
    metadata_name = next(name for name in wheel_names if name.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(metadata_name).decode()
    assert "Name: ttnn-flashdecode" in metadata
    assert "Requires-Python: <3.13,>=3.10" in metadata
    for requirement in ("ttnn==0.81.*", "numpy", "ml_dtypes", "loguru"):
        assert f"Requires-Dist: {requirement}" in metadata


def test_non_editable_install_finds_kernels(wheel, tmp_path):
    """Installed from the wheel (not editable), kernel_dir() and emulator_dir() point into it."""
    target = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"pip install failed:\n{result.stdout}\n{result.stderr}"
    code = (
        "import ttnn_flashdecode.op.paths as p; "
        "print(p.__file__); print(p.kernel_dir()); print(p.emulator_dir())"
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    # cwd elsewhere: the checkout must not be importable from the working directory.
    shown = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    module_file, kernel_dir, emulator_dir = (pathlib.Path(line) for line in shown.stdout.split())
    installed = (target / "ttnn_flashdecode").resolve()
    assert module_file.resolve().parents[1] == installed, f"expected the installed copy, imported {module_file}"
    assert kernel_dir == installed / "kernels"
    assert emulator_dir == installed / "emulator"
    assert _files(kernel_dir, KERNEL_PATTERNS) == _files(REPO / "kernels", KERNEL_PATTERNS)


def test_a_command_prints_its_report_without_ttnns_debug_config(tmp_path):
    """``python -m ttnn_flashdecode ...`` quiets ttnn's import-time DEBUG config (its report is its
    output); a program that imports the package keeps its own logging level."""
    env = {k: v for k, v in os.environ.items() if k != "LOGURU_LEVEL"}
    env["PYTHONPATH"] = str(pathlib.Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    command = subprocess.run([sys.executable, "-m", "ttnn_flashdecode", "--help"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert command.returncode == 0 and "usage: python -m ttnn_flashdecode" in command.stdout
    assert "DEBUG" not in command.stderr + command.stdout
    imported = subprocess.run([sys.executable, "-c", "import ttnn_flashdecode"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0 and "Initial ttnn.CONFIG" in imported.stderr  # untouched
