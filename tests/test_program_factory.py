"""program_factory.py: the descriptor a card (or the emulator) would run, inspected without a device."""

import pytest
import ttnn

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op.paths import ARGS_HEADER, declared_named_args, kernel_dir, named_args_used
from ttnn_flashdecode.op.program_factory import (
    KERNEL_FILES, MAX_REQUESTS_PER_CORE, Addresses, build_program, decode_requests, plan_decode, set_addresses, work_table,
)
from ttnn_flashdecode.op.modifiers import ScoreModifiers
from ttnn_flashdecode.op.compute_options import ComputeOptions
from ttnn_flashdecode.op.shape import DecodeShape
from ttnn_flashdecode.op.residency import Residency, cb_plan
from ttnn_flashdecode.op.schedule import schedule

DRAM_ACCESSOR = [2, 2048]  # TensorAccessorArgs of a DRAM-interleaved bf16 tile tensor (TT_FACTS §3)
POSITIONS_ACCESSOR = [2, 12]  # any list: the factory copies the operands' args in order
ACCESSORS = [DRAM_ACCESSOR] * 5 + [POSITIONS_ACCESSOR] * 4  # no page table, no mask, and WORK: POSITIONS stands in
ADDRESSES = Addresses(q=0x1000, k=0x20000, v=0x40000, constants=0x60000, out=0x70000, positions=0x78000, work=0x7c000)
HEADER = protocol.ROW_HEADER  # [request count] before a work row's blocks


def _build(plan, addresses=ADDRESSES):
    program = build_program(plan)
    set_addresses(program, addresses)
    return program


def _row(plan, core):
    """The work row core ``core`` reads (its slot: its index in the plan's cores)."""
    table = work_table(plan)
    slot = protocol.work_slot(*core, plan.grid[0])
    assert slot == plan.cores.index(core)
    return [int(w) for w in table[slot]]


def _noc_xy(x, y):
    return x + 1, y + 16  # any injective map: the factory only copies it into the table


def _plan(batch=2, n_q=16, n_kv=2, head_dim=128, capacity=8192, block=16, grid=(8, 8), compute=ComputeOptions(),
          positions=None, split=1, max_split=1, softcap=0.0):
    shape = DecodeShape(batch, n_q, n_kv, head_dim, capacity, scores=ScoreModifiers(softcap=softcap))
    positions = positions or [100] * batch
    kv = [p + 1 for p in positions for _ in range(n_kv)]
    plan_schedule = schedule(kv, grid[0] * grid[1], max_split=max(max_split, 1), split=split,
                             max_slices_per_core=21 if max_split == 1 else 17)
    largest = max(plan_schedule.split_count(r) for r in range(len(kv)))
    busiest = max(len(slices) for slices in plan_schedule.cores)
    residency = Residency(shape.q_rows, shape.dim_tiles, block, max_split=largest, batch=batch,
                          work_requests=min(busiest, MAX_REQUESTS_PER_CORE))
    return plan_decode(shape, residency, grid=grid, arch="wormhole_b0", compute=compute, accessor_args=ACCESSORS,
                       schedule=plan_schedule, noc_xy=_noc_xy)


def test_descriptor_has_the_residency_cbs():
    plan = _plan()
    program = _build(plan)
    assert program.semaphores == [] or len(program.semaphores) == 0
    got = {(cb.format_descriptors[0].buffer_index, cb.format_descriptors[0].page_size, cb.total_size,
            cb.format_descriptors[0].data_format_as_uint8) for cb in program.cbs}
    want = {(spec.index, spec.page_bytes, spec.total_bytes, spec.data_format) for spec in cb_plan(plan.residency)}
    assert got == want and len(program.cbs) == 20  # the seed's 16, POSITIONS and the three WORK copies
    positions = next(cb for cb in program.cbs if cb.format_descriptors[0].buffer_index == protocol.CB.POSITIONS)
    assert positions.total_size == positions.format_descriptors[0].page_size == 32  # 2 users' int32, aligned
    assert positions.format_descriptors[0].data_format_as_uint8 == 8  # tt::DataFormat::Int32


ROLES = tuple(KERNEL_FILES)  # reader, compute, writer: the descriptor's kernel order


def _args(kernel) -> tuple:
    """What a kernel object is built from: its positional and named compile-time args."""
    return tuple(kernel.compile_time_args), tuple(kernel.named_compile_time_args)


def test_args_header_declares_the_plans_named_args_once_in_its_order():
    """The pair: kernels/attention_args.hpp's accessors are the plan's named compile-time args, one
    each, in the order Plan.named_compile_time_args lists them."""
    assert declared_named_args() == tuple(name for name, _ in _plan().named_compile_time_args)


def test_only_the_args_header_reads_named_args_by_their_names():
    """Every other kernel file reads a named arg through its accessor, so a name is spelled once."""
    for path in kernel_dir().iterdir():
        if path.suffix in (".cpp", ".hpp") and path.name != ARGS_HEADER:
            code = "\n".join(line.split("//")[0] for line in path.read_text().splitlines())
            assert "get_named_compile_time_arg_val" not in code, path.name


def test_kernels_have_absolute_paths_and_the_named_args_they_read():
    plan = _plan()
    program = _build(plan)
    sources = [k.kernel_source for k in program.kernels]
    assert sources == [str(kernel_dir() / n) for n in ("attention_reader.cpp", "attention_compute.cpp", "attention_writer.cpp")]
    given = dict(plan.named_compile_time_args)
    for role, kernel in zip(ROLES, program.kernels):
        reads = named_args_used(kernel_dir() / KERNEL_FILES[role])
        assert dict(kernel.named_compile_time_args) == {name: given[name] for name in reads}, role
        # compute reads no operand: the TensorAccessorArgs go to the data-movement kernels only
        assert list(kernel.compile_time_args) == ([] if role == "compute" else DRAM_ACCESSOR * 5 + POSITIONS_ACCESSOR * 7)
    compute_args = dict(program.kernels[1].named_compile_time_args)
    assert (compute_args["dim_tiles"], compute_args["block_tiles"], compute_args["dst_tiles"]) == (4, 16, 4)
    assert dict(program.kernels[0].named_compile_time_args)["q_width_tiles"] == 16 * 4
    compute = program.kernels[1].config
    assert isinstance(compute, ttnn.ComputeConfigDescriptor)
    assert compute.fp32_dest_acc_en and compute.math_fidelity == ttnn.MathFidelity.HiFi4 and not compute.math_approx_mode


def test_every_named_arg_is_read_by_some_kernel():
    """The plan gives no arg that no kernel reads."""
    reads = set().union(*(named_args_used(kernel_dir() / name) for name in KERNEL_FILES.values()))
    assert reads == set(declared_named_args())


def test_an_option_only_compute_reads_leaves_the_reader_and_writer_as_they_were():
    """A compute config or a softcap changes the compute kernel's args only: the reader's and the
    writer's are the same, so the emulator reuses their objects (and tt-metal's JIT its binaries)."""
    base = _build(_plan())
    lofi = ComputeOptions.from_config(ttnn.ComputeConfigDescriptor(
        math_fidelity=ttnn.MathFidelity.LoFi, fp32_dest_acc_en=False, math_approx_mode=True))
    for other in (_build(_plan(compute=lofi)), _build(_plan(softcap=30.0))):
        assert [_args(k) for k in other.kernels[::2]] == [_args(k) for k in base.kernels[::2]]
        assert _args(other.kernels[1]) != _args(base.kernels[1])


def test_the_compute_kernel_does_not_depend_on_the_batch_grid_or_operands():
    """Compute's args hold neither the batch, the grid, the cache's layout nor the operands'
    TensorAccessorArgs, so it shares one object across them."""
    base = _build(_plan())
    for other in (_build(_plan(batch=3, positions=[7, 100, 900])), _build(_plan(grid=(4, 4)))):
        assert _args(other.kernels[1]) == _args(base.kernels[1])


def test_compute_config_is_overridable():
    options = ComputeOptions.from_config(ttnn.ComputeConfigDescriptor(math_fidelity=ttnn.MathFidelity.LoFi, fp32_dest_acc_en=False))
    plan = _plan(compute=options)
    program = _build(plan)
    assert program.kernels[1].config.math_fidelity == ttnn.MathFidelity.LoFi
    assert dict(program.kernels[1].named_compile_time_args)["dst_tiles"] == 8


def test_approximate_exp_reaches_the_compute_kernel_as_a_named_arg():
    # tt-metal declares APPROX for the MATH and PACK threads only; the kernel takes exp_approx instead.
    plan = _plan(compute=ComputeOptions(math_approx_mode=True))
    program = _build(plan)
    assert program.kernels[1].config.math_approx_mode
    assert dict(program.kernels[1].named_compile_time_args)["exp_approx"] == 1


def test_every_core_decodes_to_its_request():
    positions = [0, 511, 8191]
    plan = _plan(batch=3, n_q=32, n_kv=8, head_dim=128, positions=positions)
    program = _build(plan)
    assert len(plan.cores) == 24 and sorted(s.request for (s,) in plan.schedule.cores) == list(range(24))
    for kernel in program.kernels:  # no per-core runtime args: tt-metal re-applies those on every cache hit
        assert len(kernel.runtime_args) == 0
    for core, (item,) in zip(plan.cores, plan.schedule.cores):
        user, group = divmod(item.request, 8)
        args = _row(plan, core)
        assert args[:HEADER] == [1] and len(args) == protocol.work_row_words(1) == 32
        assert args[HEADER + protocol.WORDS:] == [0] * (32 - HEADER - protocol.WORDS)  # padding to 64 bytes
        request = protocol.decode(args[HEADER:HEADER + protocol.WORDS])
        assert request.user == user  # its POSITIONS entry; the position itself is not in the row
        assert request.q_rows == 4 and request.query_row == user and request.dim_tiles == 4
        assert request.k.first_page == (user * 8 + group) * 256 * 4 and request.k.base == 0  # addresses: common args
        assert request.v.first_page == request.k.first_page and request.v.base == 0
        assert request.q.first_page == group * 4 * 4 == request.out.first_page  # row tile 0
        assert request.constants == protocol.Operand.interleaved(0)
    for role in (0, 2):  # reader and writer: the operands' addresses in OPERANDS order
        assert list(program.kernels[role].common_runtime_args) == [
            ADDRESSES.q, ADDRESSES.k, ADDRESSES.v, ADDRESSES.constants, ADDRESSES.out, ADDRESSES.positions, 0, 0, ADDRESSES.work, 0, 0, 0]  # no page table, mask, LSE, append
    assert list(program.kernels[1].common_runtime_args) == []


def test_more_requests_than_cores_share_cores_in_sequence():
    plan = _plan(batch=32, n_q=32, n_kv=8, positions=list(range(32)))  # 256 requests on 64 cores
    assert len(plan.cores) == 64 and set(plan.requests_per_core) == {4}
    _build(plan)
    assert plan.residency.work_requests == 4 and plan.residency.work_row_bytes == 4 * 80  # 1 + 64 words, to 80
    for core, slices in zip(plan.cores, plan.schedule.cores):
        args = _row(plan, core)
        assert args[0] == 4 and len(args) == protocol.work_row_words(4) == 80
        decoded = [protocol.decode(args[HEADER + i * 16: HEADER + 16 + i * 16]) for i in range(4)]
        want = [divmod(item.request, 8) for item in slices]  # (user, group) of each scheduled request
        assert [(r.query_row, r.k.first_page // (256 * 4) % 8) for r in decoded] == want


def test_requests_past_a_work_rows_capacity_are_refused():
    with pytest.raises(ValueError, match="requests"):
        _plan(batch=32, n_q=32, n_kv=8, grid=(1, 2))  # 256 > 2 * 21
    assert MAX_REQUESTS_PER_CORE == 21


def test_split_program_has_semaphores_noc_table_and_split_words():
    plan = _plan(batch=1, n_q=16, n_kv=2, positions=[8191], split=3, max_split=3)
    program = _build(plan)
    assert len(program.cbs) == 25 and sorted(s.id for s in program.semaphores) == [0, 1, 2, 3, 4, 5, 6]  # 2 arrival slots
    assert dict(program.kernels[0].named_compile_time_args)["inbox_slots"] == 2  # ceil(log2(3))
    assert plan.noc_table == tuple(((y + 16) << 16) | (x + 1) for x, y in plan.cores)
    for kernel in program.kernels:
        want = [] if kernel is program.kernels[1] else ADDRESSES.common_args() + list(plan.noc_table)
        assert list(kernel.common_runtime_args) == want
    assert protocol.CommonArg.CORE_TABLE == len(ADDRESSES.common_args())
    splits = []
    for core in plan.cores:
        request = protocol.decode(_row(plan, core)[HEADER:HEADER + protocol.WORDS])
        splits.append((request.split_index, request.split_count, request.split_first_core, request.k.first_page))
    # group 0's slices on cores 0..2 (reducer core 0), group 1's on cores 3..5 (reducer core 3)
    assert splits == [(0, 3, 0, 0), (1, 3, 0, 0), (2, 3, 0, 0),
                      (0, 3, 3, 256 * 4), (1, 3, 3, 256 * 4), (2, 3, 3, 256 * 4)]


def test_residency_must_hold_the_largest_split():
    shape = DecodeShape(1, 16, 2, 128, 8192)
    plan_schedule = schedule([8192, 8192], 64, max_split=4, split=4)
    with pytest.raises(ValueError, match="max_split"):
        plan_decode(shape, Residency(8, 4, 16, max_split=2, batch=1), grid=(8, 8), arch="wormhole_b0", compute=ComputeOptions(),
                    accessor_args=ACCESSORS, schedule=plan_schedule, noc_xy=_noc_xy)


def test_program_hash_ignores_positions_and_addresses_but_not_structure():
    plan = _plan()
    one = _build(plan)
    two = _build(plan, Addresses(1, 2, 3, 4, 5, 6, 0, 7))
    assert one.custom_program_hash == two.custom_program_hash == plan.program_hash
    assert _plan(block=8).program_hash != plan.program_hash
    assert _plan(batch=3).program_hash != plan.program_hash
    assert _plan(positions=[8191, 8191], split=2, max_split=2).program_hash != plan.program_hash


def test_residency_must_match_the_shape():
    shape = DecodeShape(1, 16, 2, 128, 8192)
    with pytest.raises(ValueError, match="residency"):
        plan_decode(shape, Residency(4, 4, 16), grid=(8, 8), arch="wormhole_b0", compute=ComputeOptions(),
                    accessor_args=ACCESSORS, schedule=schedule([8192, 8192], 64, max_split=1), noc_xy=_noc_xy)


def _kind_plan(kind, rows, batch=3, n_q=12, n_kv=4, positions=None):
    shape = DecodeShape(batch, n_q, n_kv, 64, 1024, kind=kind, rows=rows)
    kv = shape.kv_positions(positions)
    plan_schedule = schedule(kv, 64, max_split=1)
    return plan_decode(shape, Residency(shape.q_rows, shape.dim_tiles, 4, batch=batch), grid=(8, 8), arch="wormhole_b0",
                       compute=ComputeOptions(), accessor_args=ACCESSORS, schedule=plan_schedule, noc_xy=_noc_xy)


def test_chunk_requests_are_one_per_sequence_and_q_head():
    """CHUNK: sequence b's C = 7 rows are Q rows 7b..7b+6 (sequence 2's straddle row tiles 0 and 1),
    one request per (sequence, Q head), K/V of the head's group, kv_positions = start + C."""
    starts = [0, 45, 100]
    plan = _kind_plan("chunk", 7, positions=starts)
    requests = decode_requests(plan)
    assert len(requests) == 3 * 12 == plan.shape.requests
    width = 12 * 2  # Q tile columns: 12 heads x 2 dim tiles
    for index, request in enumerate(requests):
        user, head = divmod(index, 12)
        assert (request.q_rows, request.flags, request.positions) == (7, protocol.Flag.CHUNK, 0)
        assert (request.heads, request.rows_per_head, request.stage_rows) == (1, 7, 7)
        assert request.kv_positions == plan.shape.capacity  # planned at full capacity; positions come on device
        assert divmod(user * 7, 32) == (request.q.first_page // width, request.query_row)
        assert request.q.first_page % width == head * 2 and request.out == protocol.Operand.interleaved(0, request.q.first_page)
        assert request.k.first_page == (user * 4 + head // 3) * 32 * 2
        protocol.encode(request, plan.residency)
    program = _build(plan)
    assert dict(program.kernels[0].named_compile_time_args)["q_width_tiles"] == width


def test_rows_requests_are_one_per_user_and_kv_group():
    """ROWS: user b's P = 10 rows are Q rows 10b.. (user 3's straddle row tiles 0 and 1)."""
    cur_pos = [9, 40, 500, 1023]
    plan = _kind_plan("rows", 10, batch=4, n_q=6, n_kv=2, positions=cur_pos)
    requests = decode_requests(plan)
    assert len(requests) == 4 * 2
    for index, request in enumerate(requests):
        user, group = divmod(index, 2)
        assert (request.q_rows, request.flags, request.positions) == (3, protocol.Flag.ROWS, 10)
        assert (request.heads, request.rows_per_head, request.stage_rows) == (3, 10, 30)
        assert request.kv_positions == plan.shape.capacity
        assert (request.query_row, request.q.first_page) == (user * 10 % 32, user * 10 // 32 * 12 + group * 3 * 2)
        protocol.encode(request, plan.residency)


@pytest.mark.parametrize("kind, rows, error", [("decode", 2, "rows"), ("chunk", 33, "rows"), ("rows", 11, "rows"),
                                                ("prefill", 1, "kind")])
def test_shape_refuses_rows_outside_the_kind(kind, rows, error):
    with pytest.raises(ValueError, match=error):
        DecodeShape(1, 6, 2, 64, 1024, kind=kind, rows=rows)


def _covered(rectangles):
    return [(x, y) for x0, y0, x1, y1 in rectangles for y in range(y0, y1 + 1) for x in range(x0, x1 + 1)]


@pytest.mark.parametrize("cores, expected", [
    ([(x, y) for y in range(8) for x in range(8)], [(0, 0, 7, 7)]),       # the whole Wormhole grid: one range
    ([(x, y) for y in range(4) for x in range(8)], [(0, 0, 7, 3)]),
    ([(x, y) for y in range(3) for x in range(8)] + [(0, 3), (1, 3)], [(0, 0, 7, 2), (0, 3, 1, 3)]),  # a ragged last row
    ([(0, 0)], [(0, 0, 0, 0)]),
    ([(3, 1), (5, 1), (3, 2), (5, 2)], [(3, 1, 3, 2), (5, 1, 5, 2)]),      # a gap: two columns
])
def test_core_rectangles_are_the_cores_as_few_ranges(cores, expected):
    from ttnn_flashdecode.op.grid import core_range_set, core_rectangles

    assert core_rectangles(cores) == expected
    assert sorted(_covered(expected)) == sorted(cores)
    assert core_range_set(cores).num_cores() == len(cores)


def test_core_rectangles_cover_any_core_set_once():
    from hypothesis import given, settings, strategies as st

    from ttnn_flashdecode.op.grid import core_rectangles

    @settings(max_examples=200, deadline=None)
    @given(st.sets(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1))
    def check(cores):
        covered = _covered(core_rectangles(sorted(cores)))
        assert len(covered) == len(set(covered)) and set(covered) == cores   # every core once, nothing else

    check()
