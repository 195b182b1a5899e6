# Sourced by ./run and ./test: make .venv and install the package (with extras) when the
# project's dependencies changed since the last install.
PY="${PYTHON:-python3}"
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=".venv/.installed-${extras:-base}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    if [ -n "$extras" ]; then
        .venv/bin/python -m pip install --quiet -e ".[$extras]"
    else
        .venv/bin/python -m pip install --quiet -e .
    fi
    touch "$stamp"
fi
