"""Package list for setuptools; all other metadata lives in pyproject.toml.

pyproject.toml alone cannot both *find* the ``ttnn_flashdecode`` subpackages and add
``ttnn_flashdecode.kernels``, which is the top-level ``kernels/`` folder (mapped in
``[tool.setuptools.package-dir]``) rather than a folder under ``ttnn_flashdecode/``.

The C++ folders (``kernels/``, the emulator's ``include/`` and ``src/``) are listed as
data-only namespace packages too: setuptools warns about, and plans to stop shipping, data
in folders that Python could import but ``packages`` does not name. Their files are picked
by the package-data globs in pyproject.toml.
"""

from setuptools import find_namespace_packages, find_packages, setup


def _data_packages(package: str, folder: str) -> set[str]:
    """``package`` and every folder below ``folder`` as a subpackage of it."""
    names = find_namespace_packages(where=folder, exclude=["*__pycache__*"])
    return {package} | {f"{package}.{name}" for name in names}


PACKAGES = sorted(
    set(find_packages(include=["ttnn_flashdecode", "ttnn_flashdecode.*"]))
    | _data_packages("ttnn_flashdecode.kernels", "kernels")
    | _data_packages("ttnn_flashdecode.emulator", "ttnn_flashdecode/emulator")
)

setup(packages=PACKAGES)
