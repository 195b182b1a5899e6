"""The table daemon's configuration: one TOML file, checked whole.

    from controller.config import load_config, check_config
    cfg = load_config("/etc/progressive/table.toml")   # TableConfig, or ConfigError with every problem
    for p in check_config(path): print(p.line(path))   # "path: message (hint: ...)"

The format is documented in docs/configuration.md; `progressivectl check-config FILE` runs the checks.
"""

from controller.config.credentials import (
    CredentialError,
    hash_credential,
    parse_credential,
    verify_credential,
)
from controller.config.devices import (
    DriverSettings,
    LineDeviceSpec,
    ModbusDeviceSpec,
    build_drivers,
    driver_settings,
)
from controller.config.load import check_config, load_config
from controller.config.model import (
    BusConfig,
    CardsConfig,
    DeviceConfig,
    LinkedMeter,
    LoggingConfig,
    MeterConfig,
    MetricsConfig,
    MqttConfig,
    StandaloneMeter,
    Supervisor,
    TableConfig,
    WagerConfig,
)
from controller.tomlfile.problems import ConfigError, Problem

__all__ = [
    "BusConfig",
    "CardsConfig",
    "ConfigError",
    "CredentialError",
    "DeviceConfig",
    "DriverSettings",
    "LineDeviceSpec",
    "LinkedMeter",
    "LoggingConfig",
    "MeterConfig",
    "MetricsConfig",
    "ModbusDeviceSpec",
    "MqttConfig",
    "Problem",
    "StandaloneMeter",
    "Supervisor",
    "TableConfig",
    "WagerConfig",
    "build_drivers",
    "check_config",
    "driver_settings",
    "hash_credential",
    "load_config",
    "parse_credential",
    "verify_credential",
]
