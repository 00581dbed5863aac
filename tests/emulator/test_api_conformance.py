"""Every kernel API function the emulator's headers define exists in the installed ttnn's headers.

The emulator compiles the product's kernels against its own host headers under
``ttnn_flashdecode/emulator/include/api/**``. A kernel that compiles there must compile on a device,
so each function (or function template) those headers define at namespace scope must exist in the
installed ttnn 0.81 kernel API (``ttnn/tt_metal/hw/inc/api/**``) with the same name, and every
argument count the emulator accepts (min..max, defaults allowed) must be accepted by some real
overload of that name. Emulator internals live in namespace ``emu`` / ``emu_*`` or a ``detail``
namespace and are skipped; anything else must be listed in EXCEPTIONS with a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import ttnn

ROOT = Path(__file__).resolve().parents[2]
EMU_API = ROOT / "ttnn_flashdecode" / "emulator" / "include" / "api"
REAL_API = Path(ttnn.__file__).resolve().parent / "tt_metal" / "hw" / "inc" / "api"
# Functions the api headers pull in from internal headers (e.g. get_noc_addr, defined in
# internal/dataflow/dataflow_api_addrgen.h and reached through api/dataflow/dataflow_api.h).
REAL_INTERNAL = REAL_API.parent / "internal"

# name -> reason. Functions the emulator headers define that the installed headers do not.
EXCEPTIONS: dict[str, str] = {}

@dataclass(frozen=True)
class Func:
    name: str
    min_args: int
    max_args: int
    file: str
    namespace: str


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\\\n", " ", text)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    text = re.sub(r"\[\[.*?\]\]", " ", text, flags=re.S)
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text, flags=re.S)
    text = re.sub(r'R"(\w*)\(.*?\)\1"', '""', text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def _split_top(s: str, sep: str = ",") -> list[str]:
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _parse_decl(decl: str) -> tuple[str, int, int] | None:
    decl = decl.strip()
    if not decl or re.match(r"(return|using|typedef|static_assert|class|struct|enum|union|friend|template\s*<[^>]*>\s*(class|struct))\b", decl):
        return None
    # Drop leading template<...> headers (balanced angle brackets).
    while decl.startswith("template"):
        i, depth = decl.index("<"), 0
        for j in range(i, len(decl)):
            depth += decl[j] == "<"
            depth -= decl[j] == ">"
            if depth == 0:
                decl = decl[j + 1 :].strip()
                break
        else:
            return None
    m = re.search(r"([A-Za-z_]\w*)\s*\(", decl)
    if not m or "=" in decl[: m.start()] or "operator" in decl[: m.end()]:
        return None
    head = decl[: m.start()].split()
    if not head or m.group(1) in {"if", "for", "while", "switch", "sizeof", "decltype", "static_cast"}:
        return None  # a call or a macro invocation, not a declaration (no return type)
    # Parameter list: from the '(' to its matching ')'.
    start, depth = m.end() - 1, 0
    for j in range(start, len(decl)):
        depth += decl[j] == "("
        depth -= decl[j] == ")"
        if depth == 0:
            params = decl[start + 1 : j]
            break
    else:
        return None
    parts = [p.strip() for p in _split_top(params) if p.strip()]
    if parts == ["void"]:
        parts = []
    defaults = sum(1 for p in parts if "=" in p)
    return m.group(1), len(parts) - defaults, len(parts)


def parse_header(path: Path, rel: str) -> list[Func]:
    text = _strip(path.read_text(errors="replace"))
    funcs: list[Func] = []
    ns: list[str] = []  # namespace stack; None entries = non-namespace braces are skipped wholesale
    i, start, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ";":
            parsed = _parse_decl(text[start:i])
            if parsed:
                funcs.append(Func(*parsed, rel, "::".join(ns)))
            start = i + 1
        elif ch == "{":
            head = text[start:i].strip()
            mns = re.fullmatch(r"(?:inline\s+)?namespace\s*([\w:]*)", head)
            if mns or re.fullmatch(r'extern\s+""', head):
                ns.append(mns.group(1) if mns else "extern")
                start = i + 1
            else:
                parsed = _parse_decl(head)
                if parsed:
                    funcs.append(Func(*parsed, rel, "::".join(ns)))
                depth = 0
                for j in range(i, n):  # skip the body
                    depth += text[j] == "{"
                    depth -= text[j] == "}"
                    if depth == 0:
                        i = j
                        break
                start = i + 1
        elif ch == "}":
            if ns:
                ns.pop()
            start = i + 1
        i += 1
    return funcs


def _headers(root: Path) -> list[tuple[Path, str]]:
    return sorted((p, p.relative_to(root).as_posix()) for p in root.rglob("*") if p.suffix in {".h", ".hpp", ".inl"})


def _is_internal(namespace: str) -> bool:
    """Emulator internals: namespace emu / emu_* / any *detail* namespace / an anonymous namespace."""
    parts = namespace.split("::") if namespace else []
    return any(p == "" or p == "emu" or p.startswith("emu_") or "detail" in p for p in parts)


def _emulator_funcs() -> list[Func]:
    return [f for path, rel in _headers(EMU_API) for f in parse_header(path, rel) if not _is_internal(f.namespace)]


def _real_index() -> dict[str, list[Func]]:
    idx: dict[str, list[Func]] = {}
    for root, prefix in ((REAL_API, ""), (REAL_INTERNAL, "internal/")):
        for path, rel in _headers(root):
            for f in parse_header(path, prefix + rel):
                idx.setdefault(f.name, []).append(f)
    return idx


EMU_FUNCS = _emulator_funcs()
REAL = _real_index()


def test_installed_headers_are_found():
    assert REAL_API.is_dir(), REAL_API
    for name in ("matmul_tiles", "reduce_tile", "pack_tile", "tile_regs_acquire", "noc_async_read"):
        assert name in REAL, f"parser found no {name} in {REAL_API}"


def test_emulator_headers_define_functions():
    names = {f.name for f in EMU_FUNCS}
    for name in ("compute_kernel_hw_startup", "matmul_tiles", "reduce_tile", "exp_tile", "pack_tile"):
        assert name in names, f"parser found no {name} in {EMU_API}"


def test_parser_counts_defaults():
    src = "namespace ckernel {\ntemplate <bool a = true>\nALWI void f(uint32_t x, uint32_t y = 0, uint32_t z = f2(1, 2)) { g(1); }\n}"
    p = Path(__file__).with_name("_tmp_conformance_probe.h")
    p.write_text(src)
    try:
        (f,) = parse_header(p, "probe.h")
    finally:
        p.unlink()
    assert (f.name, f.min_args, f.max_args, f.namespace) == ("f", 1, 3, "ckernel")


@pytest.mark.parametrize("func", EMU_FUNCS, ids=lambda f: f"{f.file}:{f.name}/{f.min_args}-{f.max_args}")
def test_emulator_function_exists_in_installed_ttnn(func: Func):
    if func.name in EXCEPTIONS:
        pytest.skip(f"{func.name}: {EXCEPTIONS[func.name]}")
    real = REAL.get(func.name)
    assert real, (
        f"{func.file} defines {func.name}() (namespace '{func.namespace}'), which the installed ttnn kernel API "
        f"does not have; put emulator internals in namespace emu or detail, or list it in EXCEPTIONS with a reason"
    )
    for k in range(func.min_args, func.max_args + 1):
        assert any(r.min_args <= k <= r.max_args for r in real), (
            f"{func.file}: {func.name}() accepts {k} argument(s) but no installed overload does; installed: "
            + ", ".join(f"{r.file}: {r.min_args}..{r.max_args}" for r in real)
        )
