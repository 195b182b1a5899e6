"""Reading the files a person names and parsing TOML: a leaf that everything above may use.

`files.py` reads a regular file, bounded, and names what is wrong with it; `toml.py` is the one TOML parser and
the one placing of pydantic's errors at TOML paths; `problems.py` the problems found in a file, each with its
TOML path, and the error that carries them."""
