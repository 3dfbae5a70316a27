"""A request's PEP 3333 environ, with Placement's headers (standard library only).

Shared by the HTTP view (``benchmarks/http_view.py``) and ``make bench-check``'s worker
(``benchmarks/check_worker.py``, which loads this file by its path: it runs with another
checkout first on ``sys.path`` and imports nothing of the ``benchmarks`` package).

>>> environ("GET", "/usages?project_id=p")["QUERY_STRING"]
'project_id=p'
"""

from __future__ import annotations

import io
import sys
from typing import Any

MICROVERSION = "placement 1.39"


def environ(method: str, path: str, version: str = MICROVERSION) -> dict[str, Any]:
    """``method path`` as a WSGI server passes it to the app (no body), as the admin of
    noauth2 asking for JSON at ``version``."""
    path_info, _, query = path.partition("?")
    return {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path_info,
        "QUERY_STRING": query,
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "localhost",
        "HTTP_X_AUTH_TOKEN": "admin",
        "HTTP_ACCEPT": "application/json",
        "HTTP_OPENSTACK_API_VERSION": version,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
