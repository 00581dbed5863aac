"""Where the plugin's C++ sources are on disk, for any kind of install.

The kernel sources live in the repository's top-level ``kernels/`` folder and ship inside
the installed package as ``ttnn_flashdecode/kernels/`` (pyproject.toml maps the folder to
the data-only subpackage ``ttnn_flashdecode.kernels``).
The emulator's C++ runtime ships as package data of ``ttnn_flashdecode.emulator``
(``include/`` and ``src/``). Both must be real directories: ttnn's JIT build and the
host compiler take include paths and source file names, not Python resources.

Example:
    >>> from ttnn_flashdecode.op.paths import kernel_dir, emulator_dir
    >>> (kernel_dir() / "attention_protocol.hpp").is_file()
    True
    >>> (emulator_dir() / "include").is_dir()
    True
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import pathlib
import re

__all__ = ["kernel_dir", "emulator_dir", "package_dir", "named_args_used", "declared_named_args", "ARGS_HEADER"]

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1]  # ttnn_flashdecode/, above op/

KERNEL_DIR_ENV = "TTNN_FLASHDECODE_KERNEL_DIR"
"""Environment variable that points :func:`kernel_dir` at another folder of kernel sources."""


def package_dir() -> pathlib.Path:
    """Return the directory of the imported ``ttnn_flashdecode`` package.

    Returns:
        Absolute path of the folder holding ``ttnn_flashdecode/__init__.py``.
    """
    return _PACKAGE_DIR


def _installed_kernel_dir() -> pathlib.Path | None:
    """``<package>/kernels`` of a wheel install, through importlib.resources."""
    root = importlib.resources.files("ttnn_flashdecode")
    if not isinstance(root, pathlib.Path):  # e.g. a zipped install: no real folder to give
        return None
    return root / "kernels"


def _checkout_kernel_dir() -> pathlib.Path | None:
    """The top-level ``kernels/`` of the source checkout the package is imported from.

    That is where an editable install (``pip install -e .``, as run.sh does) and a plain
    ``PYTHONPATH=<repo>`` import find the kernels: setuptools' editable finder cannot map
    the data-only subpackage ``ttnn_flashdecode.kernels`` (it has no ``__init__.py``) onto
    ``kernels/``. Only taken when the parent folder is this project's checkout, so a stray
    ``site-packages/kernels`` is never mistaken for ours.
    """
    root = _PACKAGE_DIR.parent
    if not (root / "pyproject.toml").is_file() or not (root / "setup.py").is_file():
        return None
    return root / "kernels"


def kernel_dir() -> pathlib.Path:
    """Return the directory holding the op's kernel sources.

    The folder holds the reader, compute and writer kernels (``*.cpp``) and
    ``attention_protocol.hpp``, the parameter-block/CB header shared with the host test.

    Lookup order: the folder named by the environment variable ``TTNN_FLASHDECODE_KERNEL_DIR``
    when set (kernel development, and the mutation check, which runs the suite on mutated
    copies); ``ttnn_flashdecode/kernels`` inside the installed package (a wheel, i.e.
    ``pip install .``); then the checkout's top-level ``kernels/`` (editable install or a
    source tree on ``PYTHONPATH``).

    Returns:
        Absolute path of an existing directory.

    Raises:
        FileNotFoundError: no kernel directory exists in either place (a broken install:
            the wheel was built without its package data).
    """
    override = os.environ.get(KERNEL_DIR_ENV)
    if override:
        path = pathlib.Path(override)
        if not path.is_dir():
            raise FileNotFoundError(f"{KERNEL_DIR_ENV}: expected a folder of kernel sources, got {override!r}")
        return path.resolve()
    candidates = [_installed_kernel_dir(), _checkout_kernel_dir()]
    for candidate in candidates:
        if candidate is not None and candidate.is_dir():
            return candidate.resolve()
    tried = ", ".join(str(c) for c in candidates if c is not None)
    raise FileNotFoundError(
        f"expected the kernel sources in one of: {tried}; got no such folder. "
        "Reinstall ttnn-flashdecode (pip install .)"
    )


def emulator_dir() -> pathlib.Path:
    """Return the emulator's C++ root, the folder holding ``include/`` and ``src/``.

    Returns:
        Absolute path of ``ttnn_flashdecode/emulator`` in the imported package (the same
        folder for wheel, editable and source-tree use, since it lives in the package).

    Raises:
        FileNotFoundError: the folder or its ``include/`` subfolder is missing.
    """
    path = _PACKAGE_DIR / "emulator"
    if not (path / "include").is_dir():
        raise FileNotFoundError(
            f"expected the emulator's C++ headers at {path / 'include'}, got no such folder; "
            "reinstall ttnn-flashdecode (pip install .)"
        )
    return path


ARGS_HEADER = "attention_args.hpp"
"""The kernel header that declares every named compile-time arg once, an accessor each
(``args::dim_tiles()``); :func:`declared_named_args` reads it."""

_ACCESSOR = re.compile(r'constexpr\s+uint32_t\s+(\w+)\s*\(\s*\)\s*\{\s*return\s+get_named_compile_time_arg_val\(\s*"(\w+)"\s*\)')
_ACCESSOR_CALL = re.compile(r'\bargs::(\w+)\s*(?:<[^<>()]*>)?\s*\(')
_DIRECT_READ = re.compile(r'get_named_compile_time_arg_val\(\s*"([A-Za-z_0-9]+)"\s*\)')
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/', re.DOTALL)


def declared_named_args(folder: pathlib.Path | None = None) -> tuple[str, ...]:
    """The named compile-time args :data:`ARGS_HEADER` declares, in its order.

    Raises:
        ValueError: an accessor's name differs from the arg it reads (one spelling per arg).
    """
    text = ((folder or kernel_dir()) / ARGS_HEADER).read_text()
    names = []
    for accessor, arg in _ACCESSOR.findall(_COMMENT.sub("", text)):
        if accessor != arg:
            raise ValueError(f"{ARGS_HEADER}: expected accessor {arg}() for the arg {arg!r}, got {accessor}()")
        names.append(arg)
    return tuple(names)


def named_args_used(source: pathlib.Path) -> frozenset[str]:
    """The named compile-time args a kernel source reads: the :data:`ARGS_HEADER` accessors it calls
    (``args::name()``) or direct ``get_named_compile_time_arg_val("name")`` calls, in it and in the
    headers it includes from its own folder, recursively (comments aside).

    Why: a kernel is given only the args it reads. tt-metal's ``generic_op`` copies every kernel's
    named args on each call (host-bench: ~0.1 us an arg), and the emulator builds one object per
    distinct set of a kernel's args, so the compute kernel does not rebuild for a new batch or
    cache geometry it never reads, nor the reader and the writer for a new compute config. Each
    file is read once per version (path, mtime, size).

    Raises:
        FileNotFoundError: ``source`` does not exist.
    """
    names: set[str] = set()
    seen: set[pathlib.Path] = set()
    todo = [source.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        stat = path.stat()
        reads, includes = _scan(path, stat.st_mtime_ns, stat.st_size)
        names |= reads
        todo += [path.parent / header for header in includes if (path.parent / header).is_file()]
    return frozenset(names)


@functools.lru_cache(maxsize=64)
def _scan(path: pathlib.Path, _mtime_ns: int, _size: int) -> tuple[frozenset[str], tuple[str, ...]]:
    """(args read, local includes) of one file; the args header declares, it does not read."""
    text = path.read_text()
    includes = tuple(_LOCAL_INCLUDE.findall(text))
    if path.name == ARGS_HEADER:
        return frozenset(), includes
    code = _COMMENT.sub("", text)
    return frozenset(_ACCESSOR_CALL.findall(code)) | frozenset(_DIRECT_READ.findall(code)), includes
