"""One model name per device in the configuration: a Modbus device's is its register map's (an entry that names
one must name that one), a line-protocol device's is what its entry says, or the protocol's name."""

from __future__ import annotations

from test_config import at, base, one, problems, write

from controller.config import ConfigError, load_config


def test_every_device_has_a_model(tmp_path):
    doc = base()
    doc["devices"]["seat-1"]["model"] = "PJ-SEAT-1"  # the map's: accepted
    doc["devices"]["shoe"]["model"] = "SHOE-2000"
    cfg = load_config(write(tmp_path, doc))
    models = {name: d.model for name, d in cfg.devices.items()}
    assert models == {**{f"seat-{s}": "PJ-SEAT-1" for s in range(1, 7)}, "lockout": "PJ-LOCKOUT-1",
                      "sign": "PJ-SIGN-3", "shuffler": "line-protocol-1", "shoe": "SHOE-2000"}


def test_a_model_other_than_the_maps_names_the_field_and_both_models(tmp_path):
    doc = base()
    doc["devices"]["lockout"]["model"] = "PJ-SIGN-3"
    p = one(problems(tmp_path, doc), "devices.lockout.model")
    assert "'PJ-SIGN-3'" in p.message and "'PJ-LOCKOUT-1'" in p.message and "lockout.toml" in p.message, p.message
    try:
        load_config(write(tmp_path, doc))
    except ConfigError as e:
        assert "devices.lockout.model" in str(e)
    else:
        raise AssertionError("loaded a lock-out whose model is not its map's")


def test_a_model_name_is_printable_text(tmp_path):
    doc = base()
    doc["devices"]["shoe"]["model"] = "SHOE\n2000"
    doc["devices"]["sign"]["model"] = 3
    doc["devices"]["shuffler"]["model"] = "x" * 65
    found = problems(tmp_path, doc)
    assert "not a model name" in at(found, "devices.shoe.model").message
    assert "must be a string" in at(found, "devices.sign.model").message
    at(found, "devices.shuffler.model")
    assert len(found) == 3, found
