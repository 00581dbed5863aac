"""The house the keywords live in (issue 34): one validated, hashable options object per call
(:class:`~ttnn_flashdecode.op.options.AttentionOptions`), score modifiers as a registry
(:mod:`ttnn_flashdecode.op.modifiers`), the host backend's output in Q's layout, and the op
package's shape rules (function length, no ``attention`` callback, a keyword in at most three files)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import ttnn

from ttnn_flashdecode import attention, attention_reference, ensure_host_context
from ttnn_flashdecode.op.modifiers import REGISTRY, ScoreModifiers, scalar_modifiers
from ttnn_flashdecode.op.options import options_for
from ttnn_flashdecode.op.reference import relative_l2

OP = Path(__file__).resolve().parents[1] / "ttnn_flashdecode" / "op"
MAX_FUNCTION_LINES = 80
"""Lines of code (docstrings, comments and blank lines aside) an op/ function may have (issue 34)."""
REL_L2_BAR = 1e-2
"""The op against float64 with bfloat16 inputs at these sizes measures ~5e-3 (tests/test_attention.py)."""


def test_options_are_validated_once_per_distinct_keywords_and_hashable():
    first = options_for(sliding_window_size=64, logit_softcap=30.0, split=2)
    again = options_for(sliding_window_size=64, logit_softcap=30.0, split=2)
    assert first is again  # a decode loop's options: built and validated once
    assert hash(first) == hash(options_for(split=2, sliding_window_size=64, logit_softcap=30.0))
    assert first.scores == ScoreModifiers(window=64, softcap=30.0)
    assert first != options_for(sliding_window_size=65, logit_softcap=30.0, split=2)
    listed = options_for(grid=[(0, 0), (1, 0)])  # an unhashable keyword: validated, stored hashable
    assert listed.grid == ((0, 0), (1, 0)) and hash(listed)


@pytest.mark.parametrize("keywords, error, message", [
    (dict(sliding_window_size=0), ValueError, "sliding_window_size: expected None or a positive int"),
    (dict(sliding_window_size=2.0), TypeError, "sliding_window_size: expected None or an int"),
    (dict(logit_softcap=0.0), ValueError, "logit_softcap: expected a number c > 0"),
    (dict(logit_softcap=True), TypeError, "logit_softcap: expected None or a number"),
    (dict(attention_chunk_size=48), ValueError, "attention_chunk_size: expected a positive multiple of 32"),
    (dict(is_causal=1), TypeError, "is_causal: expected a bool"),
    (dict(is_causal=False, sliding_window_size=64), ValueError, "is_causal: non-causal .* got sliding_window_size"),
    (dict(return_lse=True, compute_kernel_config=None, backend="x"), ValueError, "backend: expected one of"),
])
def test_options_refuse_bad_keywords_by_name(keywords, error, message):
    with pytest.raises(error, match=message):
        options_for(**keywords)


def test_score_modifiers_refuse_bad_fields_and_combinations():
    """The fields' own invariants (what the keywords' validation hands on, checked again where the
    program is keyed) and the combinations the modifiers refuse with the call's kind."""
    for fields, message in [(dict(softcap=-1.0), "softcap: expected a finite float >= 0.0"),
                            (dict(window=-1), "window: expected an int >= 0"),
                            (dict(attention_chunk=48), "attention_chunk: expected an int >= 0 that is a multiple of 32"),
                            (dict(mask_users=1), "mask_users: an attention mask needs causal=False"),
                            (dict(causal=False, window=8), "is_causal: non-causal attention takes no window or chunk")]:
        with pytest.raises(ValueError, match=message):
            ScoreModifiers(**fields)
    with pytest.raises(ValueError, match="causal: non-causal attention is decode only"):
        ScoreModifiers(causal=False).check(rows=2, kind="rows")
    with pytest.raises(ValueError, match="sliding_window_size: expected at most cache_position_modulo 64"):
        ScoreModifiers(window=65).check(rows=1, kind="decode", cache_wrap=64)


@pytest.mark.parametrize("keywords, message", [
    (dict(is_causal=None), "is_causal: expected a bool"),
    (dict(is_causal=0), "is_causal: expected a bool"),
    (dict(sliding_window_size=0j), "sliding_window_size: expected None or an int"),
    (dict(sliding_window_size=0.0), "sliding_window_size: expected None or an int"),
    (dict(sliding_window_size=False), "sliding_window_size: expected None or an int"),
])
def test_the_drop_ins_check_the_modifiers_types_as_attention_does(keywords, message):
    """ttnn's drop-in semantics (0 is no window, as ttnn's) never turn a wrong type into a meaning."""
    from ttnn_flashdecode.transformer import scaled_dot_product_attention_decode

    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 2, 4, 64)).astype(np.float32)
    k = rng.standard_normal((2, 1, 64, 64)).astype(np.float32)
    with pytest.raises(TypeError, match=message):
        scaled_dot_product_attention_decode(q, k, k, cur_pos=[10, 40], **keywords)


def test_every_modifier_is_a_keyword_of_attention_and_a_field_of_the_modifiers():
    parameters = inspect.signature(attention).parameters
    fields = {field.name for field in ScoreModifiers.__dataclass_fields__.values()}
    assert {modifier.KEYWORD for modifier in REGISTRY} <= set(parameters)
    assert {modifier.FIELD for modifier in REGISTRY} == fields
    assert [m.KEYWORD for m in REGISTRY][:3] == ["logit_softcap", "sliding_window_size", "attention_chunk_size"]


def test_the_modifiers_reference_hooks_are_the_rules_they_state():
    scores = np.array([-300.0, -5.0, 0.0, 5.0, 300.0])
    capped = scalar_modifiers(logit_softcap=30.0).reference_scores(scores)
    np.testing.assert_allclose(capped, 30.0 * np.tanh(scores / 30.0))
    assert scalar_modifiers().reference_scores(scores) is scores
    both = scalar_modifiers(sliding_window_size=100, attention_chunk_size=64)
    assert [both.first_position(p) for p in (0, 31, 32, 63, 64, 150, 1000)] == [0, 0, 0, 0, 64, 128, 960]
    assert scalar_modifiers(sliding_window_size=100).first_position(1000) == 901


def test_context_parallel_refusals_come_from_the_modifiers():
    refused = scalar_modifiers(sliding_window_size=128, attention_chunk_size=64).unsupported("context_parallel")
    assert [keyword for keyword, _, _ in refused] == ["sliding_window_size", "attention_chunk_size"]
    assert scalar_modifiers(logit_softcap=50.0).unsupported("context_parallel") == []


def test_a_host_tile_q_gives_a_tile_output_and_a_row_major_q_a_row_major_one():
    """As ttnn's decode op: the output has Q's layout (TILE for TILE), and its values are the op's."""
    ensure_host_context()
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 1, 2, 4 * 64)).astype(ml_dtypes.bfloat16).astype(np.float32)
    k = rng.standard_normal((2, 2, 64, 64)).astype(ml_dtypes.bfloat16).astype(np.float32)
    v = rng.standard_normal((2, 2, 64, 64)).astype(ml_dtypes.bfloat16).astype(np.float32)
    reference = attention_reference(q, k, v, cur_pos=[0, 40])
    for layout in (ttnn.TILE_LAYOUT, ttnn.ROW_MAJOR_LAYOUT):
        out = attention(ttnn.Tensor(q, ttnn.bfloat16, layout=layout), k, v, cur_pos=[0, 40])
        assert out.layout == layout and list(out.shape) == [1, 1, 2, 256]
        assert relative_l2(np.asarray(out.to_list(), np.float32), reference) < REL_L2_BAR


# ------------------------------------------------------------------- the op package's shape


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _code_lines(node, lines: list[str]) -> int:
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    used = {i for statement in body for i in range(statement.lineno, statement.end_lineno + 1)}
    return sum(1 for i in used if lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def test_no_op_function_is_over_80_lines_of_code():
    """(Modules: tests/test_architecture.py holds them to 500 lines.)"""
    long = []
    for path in sorted(OP.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        long += [f"{path.name}:{f.name} {_code_lines(f, lines)}" for f in _functions(ast.parse(source))
                 if _code_lines(f, lines) > MAX_FUNCTION_LINES]
    assert not long


MAX_POSITIONAL = 6
"""Positional parameters an op/ function may take (issue 34: no ``validate_inputs``-style lists)."""


def test_no_op_function_takes_more_than_six_positional_parameters():
    wide = []
    for path in sorted(OP.rglob("*.py")):
        for f in _functions(ast.parse(path.read_text())):
            positional = [a.arg for a in f.args.posonlyargs + f.args.args if a.arg not in ("self", "cls")]
            if len(positional) > MAX_POSITIONAL:
                wide.append(f"{path.name}:{f.name} {len(positional)}")
    assert not wide


def test_attention_is_never_passed_as_a_callback():
    for path in sorted(OP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) != "inspect.signature":  # reading, not calling
                passed = [*node.args, *(keyword.value for keyword in node.keywords)]
                assert not any(isinstance(a, ast.Name) and a.id == "attention" for a in passed), path.name


def _pass_through_names(path: Path, keyword: str) -> int:
    return sum(1 for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.keyword) and node.arg == keyword and isinstance(node.value, ast.Name)
               and node.value.id == keyword)


@pytest.mark.parametrize("keyword, own", [("logit_softcap", "softcap.py"), ("sliding_window_size", "window.py")])
def test_a_modifier_keyword_is_used_in_at_most_three_op_files(keyword, own):
    """Its own module, the options and the drop-in translation (issue 34): a new modifier does not
    thread a flag through the package. A bare name that is only passed on as ``x=x`` does not count."""
    users = []
    for path in sorted(OP.rglob("*.py")):
        names = sum(1 for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.Name) and node.id == keyword)
        if names > _pass_through_names(path, keyword) or (path.name == own and keyword in path.read_text()):
            users.append(path.name)
    assert len(users) <= 3 and own in users, users
