"""A table's link client alone in a child process (no table daemon, no devices): for the tests that kill it,
freeze it or stop it. Arguments: the MqttSettings as JSON, the table id, its state directory. Prints "ready" once
the authority's `expect` is heard (the link then takes `offline`); SIGTERM is a clean stop (exit 0)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

from controller.link.client import TableLink
from controller.link.mqtt import MqttSettings

from linkrig import METER, mqtt_config
from rigtable import until


async def main(settings: dict, table: str, state_dir: Path) -> None:
    settings["ca_file"] = Path(settings["ca_file"])
    link = TableLink(table, mqtt_config(table), {"fchb": METER}, state_dir, settings=MqttSettings(**settings))
    await asyncio.to_thread(link.open)
    task = asyncio.create_task(link.run())
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await until(lambda: task.done() or link.approvers is not None, "the authority's expect", 20)
        print("ready", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        link.close()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2], Path(sys.argv[3])))
