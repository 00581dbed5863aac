"""Work scheduling: which core runs which split-K slice of which request. Pure host code.

A *request* is one (user, KV group): ``kv_positions`` live positions, ``live_tiles(kv_positions)``
position tiles of K (and as many of V) to read and attend over. A request may be cut into
``count`` split-K *slices* (:func:`ttnn_flashdecode.op.kv_walk.slice_tiles`); slice ``i`` runs on
core ``first_core + i`` of the core table, and slices ``1..count-1`` send their partial
``(O, l, m)`` to slice 0's core, which combines them.

Rules of a :class:`Schedule` (tested in ``tests/test_schedule.py``):

- every request's slices ``0..count-1`` appear exactly once;
- a split request (``count > 1``) owns ``count`` consecutive cores, ``first_core .. first_core +
  count - 1``, one slice each, and those cores hold nothing else (the combine protocol pairs one
  reducer with its senders; a core that also served other requests would stall them behind, or
  in front of, the combine);
- unsplit requests (``count == 1``) are packed onto the remaining cores, at most
  ``max_slices_per_core`` per core (a work row's bound: 21 parameter blocks,
  ``program_factory.MAX_REQUESTS_PER_CORE``), balanced by live tiles
  with the LPT rule (longest first onto the least loaded core);
- at most ``cores`` cores are used.

Choosing the split counts (``split=None``): the smallest per-core load ``T`` (live tiles) for
which every request cut into ``ceil(live / T)`` slices (each slice at least
``min_slice_tiles``, at most ``max_split`` slices, never more slices than live tiles), plus the
cores the unsplit requests need at load ``T``, fits the grid. ``T`` is found by bisection; the
unsplit requests then spread over every core the split ones left free.

Balance guarantee (derived from the code below; checked by ``tests/test_schedule_balance.py``).
Write ``t`` for a request's live tiles, ``m`` for ``min_slice_tiles``, ``cap = max(1, min(max_split,
t // m))``, ``f(T)`` for the cores the rule needs at load ``T`` (``_cores_needed``) and ``L`` for
the bisection's result.

1. ``f`` never grows with ``T`` (at ``T + 1`` a count stays or drops; a request that stops being
   split frees 2 cores and adds ``t = T + 1`` tiles, at most one core, to the unsplit ones), so
   ``L`` is the least load that fits, and every request gets ``min(cap, ceil(t / L))`` slices:
   the fewest that keep its slices within ``L``, none under ``m`` tiles, and one (no split) when
   ``t <= L``.
2. ``L`` is a lower bound on the busiest core of ANY schedule obeying these rules: at that
   schedule's busiest load ``B`` each request it splits needs at least ``min(cap, ceil(t / B))``
   cores of its own, and the requests the rule leaves whole fit ``ceil(sum / B)`` cores (those it
   splits but the rule does not have ``t <= B``), so ``f(B) <= cores`` and ``L <= B``.
3. A split core holds ``<= max(L, ceil(t / cap))`` tiles; ``ceil(t / cap) > L`` only where the
   cap binds, where no legal schedule does better for that request (``< 2m`` when ``m`` binds).
4. An unsplit core whose smallest request has ``s`` tiles holds ``<= s + floor((U - s) / b)``
   (``U`` tiles of unsplit requests on ``b`` cores; Graham's list-scheduling bound: longest
   first, so ``s`` went last, onto the then least loaded core, which held at most the mean of
   what was placed before it). Where a core holds two or more, ``b >= U / L`` and ``s <= U /
   (b + 1)``, so it holds ``< 2L``; a core with one request holds a piece every schedule has.
   (A core that reaches ``max_slices_per_core`` leaves the packing early; the bound is claimed
   only when none does.)

Hence the busiest core is ``< 2 * best legal schedule``, and below ``2L`` unless it is one whole
request or capped slice. Against the ideal even share ``E = ceil(total / cores)``: ``L >= E``
when no cap binds (every core the rule counts holds at most ``L``), and ``L <=
ceil(2 * total / cores)`` when ``len(kv_positions) <= max_slices_per_core`` or ``total <= cores *
max_slices_per_core`` (at that load each split request needs ``< t * cores / total`` cores and
the unsplit ones the rest); so with no cap binding a request of at most ``E`` tiles is never
split. Both ends are reached: MiniCPM5-1B's 2 x 256 tiles on 130 cores give ``L = E = 4``, while
33 requests of 64 tiles on 64 cores cannot all be split
(66 cores), so one core holds a whole request, 64 tiles, ~1.94x ``E = 33`` -- and so does the best
legal schedule. No bound of the form ``E + m`` holds for these rules: two requests of ``t`` tiles on
three cores leave one whole, ``t`` = 1.5 ``E``, for any ``t``.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from collections.abc import Sequence

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op import kv_walk

__all__ = ["DEFAULT_MIN_SLICE_TILES", "DEFAULT_MAX_SLICES_PER_CORE", "Slice", "Schedule", "schedule"]

DEFAULT_MIN_SLICE_TILES = 4
"""Smallest split-K slice (live position tiles) the work-based planner cuts (``split=None``).

From the cost model (:mod:`ttnn_flashdecode.tools.cost_model`, per-call cost fitted to the seed's
Blackhole slope of 3.17 us per position tile, DESIGN.md §8; call counts fitted from the
emulator): a live position tile costs the compute kernel ~22 API calls, a slice's own fixed work
(query scaling, first-block set-up) a few tens more, and a request cut into ``n`` slices has
``ceil(log2(n))`` levels of the two-pass combine on its critical path (~2 calls per level in the
max pass, ~20 in the sum pass). Over the benchmark grid (three models, contexts 1k..128k, batch
1 and 32, n150 and p150) the geometric mean of the modelled time over the DRAM roofline is 1.792,
1.812, 1.802, 1.832, 1.854 and 1.857 for bounds 2, 3, 4, 5, 6 and 8 (uniform per-call
weighting). 4 is within 0.6% of the lowest (2) with half as many tree hops per request, whose
fixed NoC and semaphore latency the model leaves out; it puts MiniCPM5-1B at batch 1, 8k context
(2 requests x 256 tiles) on 128 cores of a p150. Re-derive it when the kernels' per-slice or
combine work changes (``python -m ttnn_flashdecode bench --min-slice-tiles N`` compares).
"""

DEFAULT_MAX_SLICES_PER_CORE = 21
"""Parameter blocks per core: a work row's bound (``protocol.MAX_REQUESTS_PER_CORE``)."""


@dataclasses.dataclass(frozen=True)
class Slice:
    """One split-K slice of one request.

    Attributes:
        request: index into the schedule's ``kv_positions``.
        index: split-K slice index, ``0..count-1`` (0 is the reducer).
        count: slices the request is cut into (1 = not split).
    """

    request: int
    index: int
    count: int

    def tiles(self, kv_positions: int) -> tuple[int, int]:
        """Live position tiles ``[begin, end)`` of this slice (:func:`kv_walk.slice_tiles`)."""
        return kv_walk.slice_tiles(kv_positions, self.index, self.count)

    def live_tiles(self, kv_positions: int) -> int:
        """Live position tiles this slice attends over (may be 0 for a forced split)."""
        begin, end = self.tiles(kv_positions)
        return end - begin


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Which slices each used core runs.

    Attributes:
        cores: per used core, in core-table order, the slices it runs in sequence. Core ``c`` of
            the table is the one the program factory places at position ``c`` of its core list;
            a split request's slice ``i`` is on core ``first_core(request) + i``.
    """

    cores: tuple[tuple[Slice, ...], ...]

    def __post_init__(self) -> None:
        """Refuse a schedule the kernels cannot run: their split-K handshakes count one split item
        per core (``kSemQueryReady``, ``kSemMaxReady``, ``kSemInboxReady``), and a split request's
        slices sit on consecutive cores in slice order (the core table the tree addresses).

        Raises:
            ValueError: a core holds a split slice and anything else, or a split request's slices
                are not on consecutive cores in order.
        """
        for core, slices in enumerate(self.cores):
            if any(s.count > 1 for s in slices) and len(slices) != 1:
                raise ValueError(f"schedule: expected a core with a split-K slice to hold nothing else, got core {core} "
                                 f"with {slices}")
        for (request, index), core in self._where.items():
            if index and self._where.get((request, index - 1)) != core - 1:
                raise ValueError(f"schedule: expected request {request}'s split-K slices on consecutive cores, got "
                                 f"slice {index} on core {core}")

    @functools.cached_property
    def _where(self) -> dict[tuple[int, int], int]:
        """(request, slice index) -> core index."""
        return {(s.request, s.index): core for core, slices in enumerate(self.cores) for s in slices}

    @functools.cached_property
    def _counts(self) -> dict[int, int]:
        return {s.request: s.count for slices in self.cores for s in slices}

    @property
    def requests(self) -> int:
        """Number of requests scheduled."""
        return len(self._counts)

    @property
    def used_cores(self) -> int:
        """Cores that run at least one slice (``len(cores)``)."""
        return len(self.cores)

    def split_count(self, request: int) -> int:
        """Slices ``request`` is cut into (1 = not split).

        Raises:
            KeyError: ``request`` is not in the schedule.
        """
        return self._counts[request]

    def first_core(self, request: int) -> int:
        """Core index holding slice 0 of ``request`` (its reducer when split).

        Raises:
            KeyError: ``request`` is not in the schedule.
        """
        return self._where[(request, 0)]

    def core_of(self, request: int, index: int) -> int:
        """Core index holding slice ``index`` of ``request``.

        Raises:
            KeyError: no such slice in the schedule.
        """
        return self._where[(request, index)]

    def live_tiles_per_core(self, kv_positions: Sequence[int]) -> list[int]:
        """Live position tiles each used core attends over (sum over its slices), in core order.

        Args:
            kv_positions: the same per-request live positions the schedule was built for.
        """
        return [sum(s.live_tiles(int(kv_positions[s.request])) for s in slices) for slices in self.cores]


def _check_int(name: str, value, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"{low} <= {name} <= {high}"
        raise ValueError(f"{name}: expected {bound}, got {value}")
    return value


def _pack(requests: Sequence[int], live: Sequence[int], bins: int, per_bin: int) -> list[list[int]]:
    """LPT: requests sorted by live tiles (descending, then index) onto the least loaded bin that
    still has room for another parameter block; each bin's requests end up in request order."""
    order = sorted(requests, key=lambda r: (-live[r], r))
    heap = [(0, 0, b) for b in range(bins)]  # (load, blocks, bin); a full bin leaves the heap
    out: list[list[int]] = [[] for _ in range(bins)]
    for r in order:
        load, blocks, b = heapq.heappop(heap)
        out[b].append(r)
        if blocks + 1 < per_bin:
            heapq.heappush(heap, (load + live[r], blocks + 1, b))
    return [sorted(b) for b in out if b]


def _counts_for(load: int, live: Sequence[int], caps: Sequence[int]) -> list[int]:
    return [min(cap, max(1, -(-t // load))) for t, cap in zip(live, caps)]


def _cores_needed(load: int, live: Sequence[int], caps: Sequence[int], per_core: int) -> int:
    counts = _counts_for(load, live, caps)
    split_cores = sum(c for c in counts if c > 1)
    unsplit = [t for t, c in zip(live, counts) if c == 1]
    if not unsplit:
        return split_cores
    return split_cores + max(-(-sum(unsplit) // load), -(-len(unsplit) // per_core))


def schedule(
    kv_positions: Sequence[int],
    cores: int,
    *,
    max_split: int,
    min_slice_tiles: int = DEFAULT_MIN_SLICE_TILES,
    max_slices_per_core: int = DEFAULT_MAX_SLICES_PER_CORE,
    split: int | None = None,
) -> Schedule:
    """Assign every request's split-K slices to cores so the live tiles per core are balanced.

    Args:
        kv_positions: per request, the live positions it attends to (``cur_pos + 1``; >= 1).
            Live tiles are ``kv_walk.live_tiles(kv)``.
        cores: cores available (the compute grid, e.g. 64 on n150, 130 on p150); >= 1.
        max_split: most slices per request (``protocol.MAX_SPLIT`` = 255 fits word 5); >= 1.
        min_slice_tiles: with ``split=None``, no request is cut into slices smaller than this
            (live tiles; slice sizes differ by at most one, so the bound holds for every slice);
            default :data:`DEFAULT_MIN_SLICE_TILES`.
        max_slices_per_core: parameter blocks one core may run (a work row's bound); default 21.
        split: ``None``: choose counts by work (module docstring). An int ``k``: cut every
            request into ``min(k, max_split)`` slices, even into more slices than it has live
            tiles (the extra slices are empty; the kernels handle them), which tests use.

    Returns:
        The :class:`Schedule`: split requests first (in request order, each on its consecutive
        run of cores), then the cores packed with unsplit requests.

    Raises:
        TypeError: a count or position is not an int.
        ValueError: ``cores``, ``max_split``, ``min_slice_tiles``, ``max_slices_per_core`` or
            ``split`` below 1, ``max_split`` or ``split`` above 255, a position below 1, no
            request, more requests than ``cores * max_slices_per_core``, or a forced split that
            needs more cores than ``cores``.

    Example:
        >>> plan = schedule([8192, 8192], 130, max_split=255)   # MiniCPM5-1B, batch 1, 8k
        >>> plan.used_cores, plan.split_count(0), plan.first_core(1)
        (128, 64, 64)
    """
    cores = _check_int("cores", cores, 1)
    max_split = _check_int("max_split", max_split, 1, protocol.MAX_SPLIT)
    min_slice_tiles = _check_int("min_slice_tiles", min_slice_tiles, 1)
    max_slices_per_core = _check_int("max_slices_per_core", max_slices_per_core, 1)
    if split is not None:
        split = _check_int("split", split, 1, protocol.MAX_SPLIT)
    kv = [_check_int(f"kv_positions[{r}]", p, 1) for r, p in enumerate(kv_positions)]
    if not kv:
        raise ValueError("kv_positions: expected at least one request, got none")
    if len(kv) > cores * max_slices_per_core:
        raise ValueError(
            f"kv_positions: expected at most {cores * max_slices_per_core} requests ({cores} cores x "
            f"{max_slices_per_core} per core), got {len(kv)}"
        )
    live = [kv_walk.live_tiles(p) for p in kv]

    if split is not None:
        counts = [min(split, max_split)] * len(kv)
        if counts[0] > 1 and sum(counts) > cores:
            raise ValueError(
                f"split: expected at most {cores} cores for {len(kv)} requests x {counts[0]} slices, "
                f"got {sum(counts)}"
            )
    else:
        # A request may be cut into at most max_split slices, never into slices under
        # min_slice_tiles (floor keeps every slice >= the bound), never more than its tiles.
        caps = [max(1, min(max_split, t // min_slice_tiles)) for t in live]
        low, high = 1, sum(live)  # high is always feasible: every request unsplit (see Raises)
        while low < high:
            mid = (low + high) // 2
            if _cores_needed(mid, live, caps, max_slices_per_core) <= cores:
                high = mid
            else:
                low = mid + 1
        counts = _counts_for(low, live, caps)

    table: list[tuple[Slice, ...]] = []
    for r, count in enumerate(counts):
        if count > 1:
            table.extend((Slice(r, i, count),) for i in range(count))
    unsplit = [r for r, count in enumerate(counts) if count == 1]
    if unsplit:
        bins = min(cores - len(table), len(unsplit))
        if bins * max_slices_per_core < len(unsplit):  # only reachable through the bisection's rounding
            raise ValueError(
                f"kv_positions: expected {len(unsplit)} unsplit requests to fit {bins} free cores x "
                f"{max_slices_per_core}, got {bins * max_slices_per_core} places"
            )
        for requests in _pack(unsplit, live, bins, max_slices_per_core):
            table.append(tuple(Slice(r, 0, 1) for r in requests))
    return Schedule(tuple(table))
