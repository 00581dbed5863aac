"""README.md and docs/*.md: the README stays a front door, every relative link resolves, and every
figure block still matches the command that produced it.

The figure convention (docs/profiling.md, "Figures in these docs"): an HTML comment naming the
command, directly followed by a fenced block of what it printed::

    <!-- figures: python -m ttnn_flashdecode bench --models minicpm5-1b ... --emulate-budget 0 -->
    ```text
    <lines of the command's output>
    ```

The block may hold a subset of the output's lines (e.g. the table without the legend), in the
output's order; each must equal an output line up to whitespace. Cheap commands -- ``bench`` with
``--emulate-budget 0`` (every row analytic, MODELLED) or ``--mesh`` (analytic) -- are re-run by
the default suite; the others (emulator runs) only with ``FLASHDECODE_DOC_FIGURES=all``.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 300

FIGURES = re.compile(r"^<!-- figures: (?P<command>[^\n]+?) -->\n```[a-z]*\n(?P<block>.*?)^```", re.S | re.M)
MARKER = re.compile(r"^<!-- figures:", re.M)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
PREFIX = "python -m ttnn_flashdecode "


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, markup and punctuation dropped (``-`` and ``_``
    kept), spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    """Every heading's anchor in ``path``, with GitHub's ``-1``, ``-2`` suffixes on repeats."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*)", line)
        if not match:
            continue
        slug = github_slug(match.group(1))
        count = seen.get(slug, 0)
        found.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    return found


def relative_links(path: pathlib.Path) -> list[str]:
    """The relative link targets of ``path``'s markdown, outside code blocks."""
    text = FENCE.sub("", path.read_text())
    return [m.group("target") for m in LINK.finditer(text)
            if not re.match(r"[a-z]+:", m.group("target"))]


def _normal(line: str) -> str:
    return " ".join(line.split())


def figure_drift(block: str, output: str) -> list[str]:
    """The block's lines that are not, in order, lines of ``output`` (whitespace aside)."""
    printed = [_normal(line) for line in output.splitlines()]
    missing, at = [], 0
    for line in (_normal(line) for line in block.splitlines()):
        if not line:
            continue
        try:
            at = printed.index(line, at) + 1
        except ValueError:
            missing.append(line)
    return missing


def is_cheap(command: str) -> bool:
    """A modelled ``bench`` run: no emulator (seconds, whatever the kernel cache holds)."""
    words = shlex.split(command[len(PREFIX):])
    analytic = "--mesh" in words or ("--emulate-budget" in words and words[words.index("--emulate-budget") + 1] == "0")
    return words[:1] == ["bench"] and analytic and "--mla" not in words


def _figures():
    for path in DOCS:
        for match in FIGURES.finditer(path.read_text()):
            yield pytest.param(match.group("command"), match.group("block"),
                               id=f"{path.relative_to(ROOT)}:{path.read_text()[:match.start()].count(chr(10)) + 1}")


FIGURE_CASES = list(_figures())


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md: expected at most {README_MAX_LINES} lines, got {lines}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        goal = (path.parent / file_part).resolve() if file_part else path
        if not goal.exists():
            broken.append(f"{target}: no such file")
        elif anchor and goal.suffix == ".md" and anchor not in anchors(goal):
            broken.append(f"{target}: no heading '#{anchor}' in {goal.relative_to(ROOT)}")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figures_marker_is_followed_by_its_block(path):
    text = path.read_text()
    assert len(MARKER.findall(text)) == len(FIGURES.findall(text)), (
        f"{path.relative_to(ROOT)}: a '<!-- figures: COMMAND -->' line must be followed directly by a fenced block")
    for match in FIGURES.finditer(text):
        assert match.group("command").startswith(PREFIX), match.group("command")


def test_the_docs_have_cheap_figures():
    assert sum(is_cheap(command) for command, _ in (case.values for case in FIGURE_CASES)) >= 5


@pytest.mark.parametrize("command, block", FIGURE_CASES)
def test_doc_figures_match_their_command(command, block):
    if not is_cheap(command) and os.environ.get("FLASHDECODE_DOC_FIGURES") != "all":
        pytest.skip("an emulator run: re-run with FLASHDECODE_DOC_FIGURES=all")
    run = subprocess.run([sys.executable, "-m", "ttnn_flashdecode", *shlex.split(command[len(PREFIX):])],
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    missing = figure_drift(block, run.stdout)
    assert not missing, (f"`{command}` no longer prints these lines of the doc (update the doc from its output):\n"
                         + "\n".join(missing) + "\n--- it printed:\n" + run.stdout)


def test_figure_drift_is_caught():
    output = "header   a  b\n----\nrow 1   70.0  29.1\nrow 2   1094.5  932.1\nlegend\n"
    assert figure_drift("header a b\nrow 1 70.0 29.1\n\nrow 2 1094.5    932.1", output) == []
    assert figure_drift("row 1 71.0 29.1", output) == ["row 1 71.0 29.1"]  # a drifted figure
    assert figure_drift("row 2 1094.5 932.1\nrow 1 70.0 29.1", output) == ["row 1 70.0 29.1"]  # out of order


def test_github_slugs():
    assert github_slug("The benchmark (no card)") == "the-benchmark-no-card"
    assert github_slug("`q`, `k`, `v`") == "q-k-v"
    assert github_slug("`sliding_window_size`") == "sliding_window_size"
    assert github_slug("Context parallel (issue 23 item 2): `context_parallel_attention`") == \
        "context-parallel-issue-23-item-2-context_parallel_attention"


def test_multi_chip_doc_examples_run_and_match_the_reference():
    """docs/multi_chip.md's emulated-mesh examples (tensor and context parallel) against float64."""
    import numpy as np

    from ttnn_flashdecode.op.reference import attention_reference, pcc

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "multi_chip.md").read_text(), flags=re.S)
    assert len(blocks) == 2
    names: dict = {}
    for block in blocks:
        exec(block, names)  # noqa: S102 - our own documentation
    ref = attention_reference(names["mq"], names["mk"], names["mv"], cur_pos=[5, 1000])
    assert pcc(np.asarray(names["mesh_full"], np.float64), ref) >= 0.9999
    assert pcc(np.asarray(names["cp_full"], np.float64), ref) >= 0.9999


def test_the_readme_keyword_table_names_every_public_keyword():
    """Every keyword of attention(), the four drop-ins and context_parallel_attention has a line in
    the README's keyword table (the tensors themselves under `q`, `k`, `v`), and every line links
    to docs/options.md."""
    import inspect

    import ttnn_flashdecode
    from ttnn_flashdecode import transformer

    calls = [ttnn_flashdecode.attention, ttnn_flashdecode.context_parallel_attention,
             transformer.scaled_dot_product_attention_decode, transformer.paged_scaled_dot_product_attention_decode,
             transformer.flash_multi_latent_attention_decode, transformer.paged_flash_multi_latent_attention_decode]
    tensors = {"q", "k", "v", "input_tensor_q", "input_tensor_k", "input_tensor_v"}
    keywords = {name for call in calls for name in inspect.signature(call).parameters} - tensors
    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| \[(.+?)\]\((docs/options\.md#[^)]+)\) \|", text, flags=re.M)
    listed = {name for cell, _ in rows for name in re.findall(r"`(\w+)`", cell)}
    assert not keywords - listed, f"README.md's keyword table lacks {sorted(keywords - listed)}"
    assert {"q", "k", "v"} <= listed
    assert len(rows) == len(set(rows)) >= len(keywords) - 2
