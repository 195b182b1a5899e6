# Sourced by ./run and ./test: defines venv_ensure, which makes .venv and installs the package (with the
# extras it is given) when the project's dependencies changed since the last install. A function, so
# that the caller's own arguments ($1...) are never read as extras.
venv_ensure() {
    local py="${PYTHON:-python3}" extras="${1:-}" stamp
    if [ ! -x .venv/bin/python ]; then
        "$py" -m venv .venv
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
}
