"""Architecture facts for the emulator, read from the installed ttnn wheel (never guessed).

`ArchSpec.for_name("wormhole_b0" | "blackhole")` is the one place these numbers are derived.
It is pure (reads a few text files of the installed ttnn package, caches the result) and
depends only on the standard library and PyYAML (a ttnn dependency), so the residency module
can import it without pulling in the emulator.

Files (``W`` = the installed ``ttnn`` package folder, ``<a>`` = ``wormhole`` | ``blackhole``):

- ``W/tt_metal/hw/inc/internal/tt-1xx/<a>/dev_mem_map.h``: ``MEM_L1_SIZE``, ``MEM_MAP_END``, the kernel
  code-size limits ``MEM_{BRISC,NCRISC,TRISC0,TRISC1,TRISC2}_KERNEL_SIZE``.
- ``W/tt_metal/hw/inc/internal/tt-1xx/<a>/core_config.h``: ``MaxDMProcessorsPerCoreType``
  (``MEM_MAP_END`` depends on it).
- ``W/tt_metal/hw/inc/internal/tt-1xx/<a>/noc/noc_parameters.h``: NoC alignments and burst size.
- ``W/tt_metal/soc_descriptors/<arch>_arch.yaml``: DRAM banks (``dram_views``), their NoC
  coordinates and address offsets, functional Tensix workers (NoC coordinates).
- ``W/tt_metal/core_descriptors/<arch>_arch.yaml``: the default compute grid.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

__all__ = ["ArchSpec", "ttnn_root", "KERNEL_CONFIG_BYTES"]

#: Size of the kernel-config region that tt-metal reserves above MEM_MAP_END on a Tensix core
#: (runtime args, semaphores, CB configs): 69 KiB, tm `tt_metal/llrt/hal/tt-1xx/wormhole/
#: wh_hal_tensix.cpp` (and the Blackhole equivalent). Not in the installed wheel's headers.
KERNEL_CONFIG_BYTES = 69 * 1024

_SOC = {"wormhole_b0": "wormhole_b0_80", "blackhole": "blackhole_140"}
_HW_DIR = {"wormhole_b0": "wormhole", "blackhole": "blackhole"}
#: Which core-descriptor product gives the default grid: n150 (nebula_x1, one dispatch row) and
#: the unharvested p150 (blackhole_140 "unharvested"), one hardware command queue.
_GRID_PRODUCT = {"wormhole_b0": ("nebula_x1", "row", 1), "blackhole": ("unharvested", "col", 1)}


def ttnn_root() -> Path:
    """The installed ttnn package folder (``.../site-packages/ttnn``), found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("ttnn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the ttnn package is not installed; the emulator reads its headers")
    for loc in spec.submodule_search_locations:
        if (Path(loc) / "tt_metal").is_dir():
            return Path(loc)
    raise RuntimeError(f"no tt_metal folder in the ttnn package at {list(spec.submodule_search_locations)}")


def _read_defines(path: Path) -> dict[str, str]:
    """#define NAME body, with backslash continuations, skipping #ifdef/#if branches that are off.

    No symbol counts as defined (so ``#ifdef RISC_A0_HW`` is off) and every ``#if <expr>`` is
    taken as false (in these headers they only guard ``#error``).
    """
    text = path.read_text()
    text = re.sub(r"\\\n", " ", text)
    defs: dict[str, str] = {}
    stack: list[bool] = []  # is the current branch active
    for raw in text.splitlines():
        line = re.sub(r"//.*", "", raw).strip()
        if not line.startswith("#"):
            continue
        tok = line[1:].strip().split(None, 1)
        if not tok:
            continue
        d = tok[0]
        active = all(stack)
        if d in ("ifdef", "if"):
            stack.append(False)
        elif d == "ifndef":
            stack.append(True)
        elif d == "elif":
            stack[-1] = False
        elif d == "else":
            stack[-1] = not stack[-1]
        elif d == "endif":
            stack.pop()
        elif d == "define" and active and len(tok) > 1:
            m = re.match(r"([A-Za-z_]\w*)(\s+(.*))?$", tok[1])
            if m and "(" not in tok[1][: len(m.group(1)) + 1][-1:]:
                defs.setdefault(m.group(1), (m.group(3) or "").strip())
    return defs


def _eval(name: str, defs: dict[str, str], extra: dict[str, int]) -> int:
    def expand(expr: str, depth: int = 0) -> str:
        if depth > 50:
            raise RuntimeError(f"macro recursion while evaluating {name}")

        def sub(m: re.Match) -> str:
            w = m.group(0)
            if w in extra:
                return str(extra[w])
            if w in defs:
                return "(" + expand(defs[w], depth + 1) + ")"
            return w

        return re.sub(r"[A-Za-z_]\w*", sub, expr)

    expr = expand(name)
    expr = re.sub(r"sizeof\(\s*u?int8_t\s*\)", "1", expr)
    expr = re.sub(r"\((?:std::)?u?int\d+_t\)", "", expr)
    expr = re.sub(r"static_cast<[^>]*>", "", expr)
    expr = re.sub(r"(\d)[uUlL]+\b", r"\1", expr)
    expr = expr.replace("/", "//")
    if re.search(r"[A-Za-z_]", re.sub(r"0x[0-9a-fA-F]+", "", expr)):
        raise RuntimeError(f"cannot evaluate {name} = {expr}")
    return int(eval(expr, {"__builtins__": {}}, {}))  # noqa: S307 - arithmetic on header numbers


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _xy(s: str) -> tuple[int, int]:
    x, y = s.split("-")
    return int(x), int(y)


@dataclasses.dataclass(frozen=True)
class ArchSpec:
    """Facts about one architecture that the emulator (and the residency planner) use.

    All sizes are bytes; coordinates are NoC-0 (x, y).
    """

    name: str  #: "wormhole_b0" | "blackhole"
    l1_bytes: int  #: MEM_L1_SIZE, dev_mem_map.h
    mem_map_end: int  #: MEM_MAP_END, dev_mem_map.h (end of the firmware-reserved L1)
    #: processor ("BRISC", "NCRISC", "TRISC0".."TRISC2") -> MEM_<P>_KERNEL_SIZE, dev_mem_map.h: the
    #: largest kernel image tt-metal's ELF loader accepts (Wormhole NCRISC: its 16 KiB IRAM)
    kernel_size_limits: tuple[tuple[str, int], ...]
    kernel_config_base: int  #: align(MEM_MAP_END, l1_alignment): start of the kernel-config region
    unreserved_base: int  #: align(MEM_MAP_END + 69 KiB, max(dram, l1 alignment)); CBs start here
    dram_banks: int  #: number of DRAM views (soc descriptor ``dram_views``)
    dram_alignment: int  #: max(NOC_DRAM_READ/WRITE_ALIGNMENT_BYTES), noc_parameters.h
    l1_alignment: int  #: max(NOC_L1_READ/WRITE_ALIGNMENT_BYTES), noc_parameters.h
    noc_max_burst: int  #: NOC_MAX_BURST_WORDS * NOC_PAYLOAD_WIDTH/8, noc_parameters.h
    default_grid: tuple[int, int]  #: compute_with_storage_grid_range size (x, y), core descriptor
    dram_bank_noc_xy: tuple[tuple[int, int], ...]  #: bank i -> NoC-0 coordinate of its worker endpoint
    dram_bank_channel: tuple[int, ...]  #: bank i -> DRAM channel
    dram_bank_offset: tuple[int, ...]  #: bank i -> bank_to_dram_offset (address_offset of the view)
    dram_channel_noc_xy: tuple[tuple[tuple[int, int], ...], ...]  #: channel -> all its NoC endpoints
    dram_view_bytes: int  #: soc descriptor ``dram_view_size``
    worker_xs: tuple[int, ...]  #: NoC-0 x of logical column 0, 1, ... (functional_workers)
    worker_ys: tuple[int, ...]  #: NoC-0 y of logical row 0, 1, ...

    @staticmethod
    @functools.cache
    def for_name(name: str) -> "ArchSpec":
        """The spec for ``"wormhole_b0"`` or ``"blackhole"``; raises ``ValueError`` otherwise."""
        if name not in _SOC:
            raise ValueError(f"expected arch 'wormhole_b0' or 'blackhole', got {name!r}")
        import yaml

        root = ttnn_root() / "tt_metal"
        hw = root / "hw/inc/internal/tt-1xx" / _HW_DIR[name]
        mem = _read_defines(hw / "dev_mem_map.h")
        m = re.search(r"MaxDMProcessorsPerCoreType\s*=\s*(\d+)", (hw / "core_config.h").read_text())
        if not m:
            raise RuntimeError(f"MaxDMProcessorsPerCoreType not found in {hw / 'core_config.h'}")
        extra = {"MaxDMProcessorsPerCoreType": int(m.group(1))}
        l1_bytes = _eval("MEM_L1_SIZE", mem, extra)
        mem_map_end = _eval("MEM_MAP_END", mem, extra)
        kernel_limits = tuple((proc, _eval(f"MEM_{proc}_KERNEL_SIZE", mem, extra))
                              for proc in ("BRISC", "NCRISC", "TRISC0", "TRISC1", "TRISC2"))
        noc = _read_defines(hw / "noc/noc_parameters.h")
        num = lambda k: _eval(k, noc, {})  # noqa: E731
        dram_al = max(num("NOC_DRAM_READ_ALIGNMENT_BYTES"), num("NOC_DRAM_WRITE_ALIGNMENT_BYTES"))
        l1_al = max(num("NOC_L1_READ_ALIGNMENT_BYTES"), num("NOC_L1_WRITE_ALIGNMENT_BYTES"))
        burst = num("NOC_MAX_BURST_WORDS") * (num("NOC_PAYLOAD_WIDTH") // 8)
        unreserved = _align(mem_map_end + KERNEL_CONFIG_BYTES, max(dram_al, l1_al))

        soc = yaml.safe_load((root / "soc_descriptors" / f"{_SOC[name]}_arch.yaml").read_text())
        chans = [[_xy(s) for s in ch] for ch in soc["dram"]]
        views = soc["dram_views"]
        bank_xy = tuple(chans[v["channel"]][v["worker_endpoint"][0]] for v in views)
        workers = [_xy(s) for s in soc["functional_workers"]]

        prod, axis, nq = _GRID_PRODUCT[name]
        core = yaml.safe_load((root / "core_descriptors" / f"{_SOC[name]}_arch.yaml").read_text())
        rng = core[prod][axis][nq]["compute_with_storage_grid_range"]
        grid = (rng["end"][0] - rng["start"][0] + 1, rng["end"][1] - rng["start"][1] + 1)
        return ArchSpec(
            name=name,
            l1_bytes=l1_bytes,
            mem_map_end=mem_map_end,
            kernel_size_limits=kernel_limits,
            kernel_config_base=_align(mem_map_end, l1_al),
            unreserved_base=unreserved,
            dram_banks=len(views),
            dram_alignment=dram_al,
            l1_alignment=l1_al,
            noc_max_burst=burst,
            default_grid=grid,
            dram_bank_noc_xy=bank_xy,
            dram_bank_channel=tuple(v["channel"] for v in views),
            dram_bank_offset=tuple(int(v["address_offset"]) for v in views),
            dram_channel_noc_xy=tuple(tuple(c) for c in chans),
            dram_view_bytes=int(soc["dram_view_size"]),
            worker_xs=tuple(sorted({x for x, _ in workers})),
            worker_ys=tuple(sorted({y for _, y in workers})),
        )

    def kernel_size_limit(self, processor: str) -> int:
        """Bytes: the largest kernel image for ``processor`` ("BRISC", "NCRISC", "TRISC0".."TRISC2")."""
        return dict(self.kernel_size_limits)[processor.upper()]

    def worker_noc_xy(self, x: int, y: int) -> tuple[int, int]:
        """NoC-0 coordinate of logical Tensix core (x, y) (unharvested: the sorted worker columns/rows)."""
        if not (0 <= x < len(self.worker_xs) and 0 <= y < len(self.worker_ys)):
            raise ValueError(
                f"expected a logical core inside {len(self.worker_xs)}x{len(self.worker_ys)}, got ({x}, {y})"
            )
        return self.worker_xs[x], self.worker_ys[y]
