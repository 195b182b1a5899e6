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
        elif [ -f .venv/.installed-base ] && [ ! pyproject.toml -nt .venv/.installed-base ]; then
            # the package is installed and current (./run came first): only the extra's own requirements, not
            # another build of the package (seconds of CPU in an isolated build environment)
            .venv/bin/python -c 'import sys, tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"][sys.argv[1]]))' \
                "$extras" > .venv/.requirements-"$extras"
            PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install --quiet --no-compile \
                -r .venv/.requirements-"$extras"
        else
            PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/python -m pip install --quiet --no-compile -e ".[$extras]"
        fi
        touch "$stamp"
    fi
}
