"""The configurations shipped with the controller, installed as the package ``progressive_examples``: example
tables (tables/), register maps (devices/), rig tables (hil/), operator paytables (paytables/), a link authority
(link/), the broker's (mosquitto/), and a box's table file, ready to install (box/). Package data, so that a box installed from a wheel or the Debian package
has them: the demo (`progressive-demo`) runs from them."""

from pathlib import Path

DIR = Path(__file__).resolve().parent


def path(*parts: str) -> Path:
    """A file of the shipped configurations, for example ``path("tables", "caribbean-stud.toml")``."""
    return DIR.joinpath(*parts)
