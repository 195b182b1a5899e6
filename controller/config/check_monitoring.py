"""[metrics] and [logging]: where the daemon's metrics are served and how it logs."""

from __future__ import annotations

from controller.config import schema
from controller.config.check import Checker, host_port
from controller.config.model import LoggingConfig, MetricsConfig


class MonitoringChecks(Checker):
    """[metrics] and [logging]: `metrics` and `logging` (the defaults when left out)."""

    def _metrics(self, raw: object) -> None:
        m = self.section(raw, "metrics", '[metrics] listen = "127.0.0.1:9464"', schema.MetricsModel)
        if m is None:
            return
        hp = host_port(m.listen)
        if hp is None:
            self.add("metrics.listen", f"{m.listen!r} is not host:port",
                     'listen = "127.0.0.1:9464", "0.0.0.0:9464" or "[::1]:9464"')
            return
        self.metrics = MetricsConfig(*hp)

    def _logging(self, raw: object) -> None:
        m = self.section(raw, "logging", '[logging] format = "json"', schema.LoggingModel)
        if m is not None:
            self.logging = LoggingConfig(m.format, m.level)


__all__ = ["MonitoringChecks"]
