"""Reading the files a person names and parsing TOML: a leaf that everything above may use.

`files.py` reads a regular file, bounded, and names what is wrong with it; `toml.py` is the one TOML parser and
the one placing of pydantic's errors at TOML paths; `problems.py` the problems found in a file, each with its
TOML path, and the error that carries them."""

from typing import TYPE_CHECKING

from controller.exports import lazy_exports

if TYPE_CHECKING:
    from controller.tomlfile.files import FileRead, FileRefused, probe, read_file, read_text, show_path
    from controller.tomlfile.problems import ConfigError, Problem, Problems
    from controller.tomlfile.toml import TomlError, parse_toml, read_toml, validate_table

_EXPORTS = {
    "ConfigError": "problems",
    "FileRead": "files",
    "FileRefused": "files",
    "Problem": "problems",
    "Problems": "problems",
    "TomlError": "toml",
    "parse_toml": "toml",
    "probe": "files",
    "read_file": "files",
    "read_text": "files",
    "read_toml": "toml",
    "show_path": "files",
    "validate_table": "toml",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)  # each name imported when first asked for

__all__ = [
    "ConfigError",
    "FileRead",
    "FileRefused",
    "Problem",
    "Problems",
    "TomlError",
    "parse_toml",
    "probe",
    "read_file",
    "read_text",
    "read_toml",
    "show_path",
    "validate_table",
]
