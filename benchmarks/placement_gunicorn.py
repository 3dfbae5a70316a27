"""Serve OpenStack Placement under gunicorn, as ``rpquery serve`` runs (in ``.venv-placement``).

The concurrency scenario (benchmarks/concurrency.py) serves both APIs the same way: the
same gunicorn, the same worker class (``gevent``: gunicorn's gevent worker, which
``rpquery serve``'s default worker extends with JSON error answers and a read timeout)
and the same worker count. ``.venv-placement`` has no gunicorn: the directory named by
``SHARED`` holds gunicorn and gevent (links into rpquery's virtualenv, same Python) and
is put *last* on ``sys.path``, so Placement's own packages win. Each worker builds
Placement's app after the fork (``placement_driver.make_app``: noauth2, the database).
Prints ``ready`` once gunicorn is started; stops on SIGTERM.

    .venv-placement/bin/python benchmarks/placement_gunicorn.py URL PORT WORKERS CLASS SHARED
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any


def _driver() -> Any:
    spec = importlib.util.spec_from_file_location(
        "placement_driver", Path(__file__).with_name("placement_driver.py")
    )
    assert spec is not None and spec.loader is not None
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    return driver


def main(url: str, port: int, workers: int, worker_class: str) -> None:
    from gunicorn.app.base import BaseApplication

    class PlacementServer(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            options = {
                "bind": f"127.0.0.1:{port}",
                "workers": workers,
                "worker_class": worker_class,
                "accesslog": None,
                "timeout": 600,  # a whole-cloud answer under load takes seconds
                "graceful_timeout": 5,
                "proc_name": "placement-bench",
                "control_socket_disable": True,
                "when_ready": lambda server: print("ready", flush=True),
            }
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return _driver().make_app(url)

    PlacementServer().run()


if __name__ == "__main__":
    sys.path.pop(0)  # this directory: nothing here may shadow Placement's packages
    sys.path.append(sys.argv[5])
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
