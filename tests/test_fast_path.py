"""The device call's program-cache-hit fast path (``op/fast_path.py``) and the per-call half of the
descriptor (operand addresses in the common runtime args), on a MOCK device: nothing executes, so
these tests assert on what was validated, planned and written into the descriptor, never on values
(the emulator's tests cover the numbers; the fast path never runs there: host inputs are values the
op validates on every call)."""

from __future__ import annotations

import numpy as np
import pytest

from ttnn_flashdecode import attention
from ttnn_flashdecode.op import fast_path, operation, protocol
from ttnn_flashdecode.op.operands import Operands
from ttnn_flashdecode.op.operation import cached_launch
from ttnn_flashdecode.op.options import options_for

BATCH, N_Q, N_KV, HEAD_DIM, CAPACITY = 2, 8, 2, 64, 1024


def _tensor(device, shape, dtype=None, layout=None, values=None):
    import ttnn

    data = np.random.default_rng(0).standard_normal(shape, dtype=np.float32) if values is None else values
    return ttnn.Tensor(data, dtype or ttnn.bfloat16, layout=layout or ttnn.TILE_LAYOUT, device=device,
                       mem_config=ttnn.DRAM_MEMORY_CONFIG)


def _inputs(device, batch=BATCH):
    import ttnn

    q = _tensor(device, (1, 1, batch, N_Q * HEAD_DIM))
    k = _tensor(device, (batch, N_KV, CAPACITY, HEAD_DIM))
    v = _tensor(device, (batch, N_KV, CAPACITY, HEAD_DIM))
    positions = _tensor(device, (batch,), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT, np.array([5, 900][:batch], np.int32))
    return q, k, v, positions


def _launch(q, k, v, positions, **options):
    return cached_launch(q, k, v, cur_pos_tensor=positions, **options)


@pytest.fixture
def refuse_validation(monkeypatch):
    """After this fixture, the validated path raises: a call that still succeeds took the fast path."""

    def refuse(*args, **kwargs):
        raise AssertionError("validate_inputs ran")

    return lambda: monkeypatch.setattr("ttnn_flashdecode.op.operation.validate_inputs", refuse)


def test_a_call_like_a_validated_one_skips_validation_and_writes_its_own_addresses(mock_device, refuse_validation):
    fast_path.clear()
    q, k, v, positions = _inputs(mock_device)
    first = attention(q, k, v, cur_pos_tensor=positions)
    launch = _launch(q, k, v, positions)
    assert launch is not None and tuple(first.shape) == tuple(q.shape)
    refuse_validation()
    q2 = _tensor(mock_device, tuple(q.shape))  # a new Q of the same spec: another address, the same plan
    assert q2.buffer_address() != q.buffer_address()
    second = attention(q2, k, v, cur_pos_tensor=positions)
    reader_args = list(launch.program.kernels[0].common_runtime_args)
    assert reader_args[protocol.CommonArg.Q_BASE] == q2.buffer_address()
    assert reader_args[protocol.CommonArg.OUT_BASE] == second.buffer_address()
    assert reader_args[protocol.CommonArg.POSITIONS_BASE] == positions.buffer_address()
    assert reader_args[protocol.CommonArg.WORK_BASE] == launch.work.buffer_address()
    assert list(launch.program.kernels[2].common_runtime_args) == reader_args  # the writer's: the same words
    assert all(len(kernel.runtime_args) == 0 for kernel in launch.program.kernels)


def test_another_spec_or_option_is_validated_again(mock_device, refuse_validation):
    fast_path.clear()
    q, k, v, positions = _inputs(mock_device)
    attention(q, k, v, cur_pos_tensor=positions)
    refuse_validation()
    with pytest.raises(AssertionError, match="validate_inputs ran"):
        attention(q, k, v, cur_pos_tensor=positions, split=1)  # another option
    with pytest.raises(AssertionError, match="validate_inputs ran"):
        attention(q, k, v, cur_pos_tensor=positions, scale=0.5)
    with pytest.raises(AssertionError, match="validate_inputs ran"):
        attention(q, k, k, cur_pos_tensor=positions)  # V is K, same specs: a program that reads no V
    k_long = _tensor(mock_device, (BATCH, N_KV, 2 * CAPACITY, HEAD_DIM))  # another spec
    with pytest.raises(AssertionError, match="validate_inputs ran"):
        attention(q, k_long, k_long, cur_pos_tensor=positions)


def test_host_visible_values_are_never_on_the_fast_path(mock_device):
    fast_path.clear()
    q, k, v, positions = _inputs(mock_device)
    attention(q, k, v, cur_pos_tensor=positions)
    assert _launch(q, k, v, positions) is not None
    assert cached_launch(q, k, v, cur_pos=[5, 900]) is None  # a list: validated on every call
    assert _launch(q, k, v, positions, backend="emulator") is None
    assert _launch(q, k, v, np.array([5, 900], np.int32)) is None
    assert _launch(np.zeros((1, 1, 2, 512), np.float32), k, v, positions) is None
    assert _launch(q, k, v, positions, attn_mask=np.zeros((2, 1, 8, CAPACITY), np.float32), is_causal=False) is None


def test_positions_of_another_spec_are_validated_again(mock_device, refuse_validation):
    import ttnn

    fast_path.clear()
    q, k, v, positions = _inputs(mock_device)
    attention(q, k, v, cur_pos_tensor=positions)
    column = _tensor(mock_device, (BATCH, 1), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT, np.array([[5], [900]], np.int32))
    assert _launch(q, k, v, column) is None
    # [batch, 1] positions are reshaped by the validated path (a ttnn op the mock cannot build), so a
    # launch prepared from them is never kept: the tensor it binds is not the caller's.
    call, options = Operands(q, k, v, cur_pos_tensor=column), options_for()
    fast_path.remember(call, options, _launch(q, k, v, positions))
    assert fast_path.lookup(call, options) is None
    refuse_validation()
    with pytest.raises(AssertionError, match="validate_inputs ran"):
        attention(q, k, v, cur_pos_tensor=column)
    attention(q, k, v, cur_pos_tensor=positions)  # the first spec still hits


def test_address_writer_writes_changed_words_only_and_refuses_wide_addresses():
    import ttnn

    from ttnn_flashdecode.op.program_factory import AddressWriter

    kernels = [ttnn.KernelDescriptor() for _ in range(3)]
    for kernel in kernels:
        kernel.common_runtime_args = [0] * (protocol.CommonArg.CORE_TABLE + 4)
    program = ttnn.ProgramDescriptor(kernels=kernels, semaphores=[], cbs=[])
    write = AddressWriter(program)
    words = list(range(1, protocol.CommonArg.CORE_TABLE + 1))
    write(words)
    reader, writer = program.kernels[0].common_runtime_args, program.kernels[2].common_runtime_args
    assert list(reader)[:len(words)] == words and list(writer) == list(reader)
    assert list(program.kernels[1].common_runtime_args) == [0] * (protocol.CommonArg.CORE_TABLE + 4)  # compute
    reader[protocol.CommonArg.K_BASE] = 999  # not the writer's: an unchanged word is not rewritten
    words[protocol.CommonArg.Q_BASE] = 77
    write(words)
    assert reader[protocol.CommonArg.Q_BASE] == 77 and writer[protocol.CommonArg.Q_BASE] == 77
    assert reader[protocol.CommonArg.K_BASE] == 999
    with pytest.raises(ValueError, match="uint32 byte address"):
        write([2 ** 32] + words[1:])
    write(words)  # the refused word is written again once valid
    assert reader[protocol.CommonArg.Q_BASE] == 77


def test_a_reopened_device_gets_fresh_operands(mock_device, monkeypatch, tmp_path):
    """Constants and WORK tables cached for a closed device are not reused on a new one with the same id."""
    import ttnn

    fast_path.clear()
    q, k, v, positions = _inputs(mock_device)
    attention(q, k, v, cur_pos_tensor=positions)
    stale = _launch(q, k, v, positions)
    ttnn.close_device(mock_device)
    reopened = ttnn.open_device(device_id=0)
    try:
        q, k, v, positions = _inputs(reopened)
        attention(q, k, v, cur_pos_tensor=positions)
        fresh = _launch(q, k, v, positions)
        assert fresh is not None and fresh is not stale
        assert fresh.work is not stale.work and fresh.constants is not stale.constants
        assert fresh.work.device() is reopened and fresh.constants.device() is reopened
    finally:
        ttnn.close_device(reopened)
        monkeypatch.setattr(ttnn, "close_device", lambda device: None)  # the fixture's close: already done

