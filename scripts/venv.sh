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
        # the venv's own pip (Python 3.11's installs editable pyproject packages) without upgrading it, and no
        # bytecode compiled ahead for every installed module: Python writes it for those imported, on first use
        if [ -z "$extras" ]; then
            local other
            for other in .venv/.installed-*; do  # an install with extras (./test came first) installed the package
                if [ -f "$other" ] && [ ! pyproject.toml -nt "$other" ]; then
                    touch "$stamp"
                    return 0
                fi
            done
            PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install --quiet --no-compile -e .
        elif [ -f .venv/.installed-base ] && [ ! pyproject.toml -nt .venv/.installed-base ] \
                && .venv/bin/python scripts/requirements.py "$extras" > .venv/.requirements; then
            # the package is installed and current (./run came first): the extras' requirements with the
            # package's own (so that pip keeps both satisfied), not another build of the package
            PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install --quiet --no-compile -r .venv/.requirements
        else
            PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install --quiet --no-compile -e ".[$extras]"
        fi
        touch "$stamp"
    fi
}
