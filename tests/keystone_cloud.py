"""A real Keystone on loopback for the drop-in tests (``tests/test_keystone_*.py``).

Keystone 30.0.0 from PyPI lives in ``.venv-keystone`` (``make keystone-venv``, pinned by
``tests/keystone-constraints.txt``) so that its dependencies never reach ``.venv``. It is
set up as an operator would: SQLite, fernet tokens, ``keystone-manage db_sync``,
``fernet_setup`` and ``bootstrap``; then served by
``tests/loopback_wsgi.py``. Users, projects and roles are made through Keystone's own
API with the bootstrap admin's token:

- ``admin`` (role ``admin`` on project ``admin``: Keystone's bootstrap),
- ``alice`` (``member``, which implies ``reader``, on ``alpha``), ``bob`` (``reader`` on
  ``beta``), ``carol`` (the custom role ``auditor`` on ``alpha``),
- ``placement`` (``service`` and ``admin`` on ``service``: the service user of
  Placement's install guide).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-keystone"
PASSWORD = "secret-pw"
#: user -> (project, roles)
USERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "alice": ("alpha", ("member",)),
    "bob": ("beta", ("reader",)),
    "carol": ("alpha", ("auditor",)),
    "placement": ("service", ("service", "admin")),
}

CONF = """[DEFAULT]
debug = false
[database]
connection = sqlite:///{dir}/keystone.db
[token]
provider = fernet
expiration = 3600
[fernet_tokens]
key_repository = {dir}/fernet-keys
[fernet_receipts]
key_repository = {dir}/fernet-receipts
[identity]
# bcrypt's fewest rounds: each password check (token issue) takes ms, not 0.3 s
password_hash_rounds = 4
"""


def available() -> bool:
    return (VENV / "bin" / "keystone-manage").exists()


@dataclass
class Keystone:
    """A running Keystone: its URL, process, and the ids of what the fixture made."""

    url: str
    process: subprocess.Popen[bytes]
    directory: Path
    projects: dict[str, str] = field(default_factory=dict)
    users: dict[str, str] = field(default_factory=dict)
    _tokens: dict[str, str] = field(default_factory=dict)

    def call(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> tuple[int, dict[str, str], Any]:
        """One request to Keystone's API; ``(status, headers, JSON body or None)``."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("content-type", "application/json")
        if token:
            req.add_header("x-auth-token", token)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw, status, headers = resp.read(), resp.status, dict(resp.headers)
        except urllib.error.HTTPError as err:
            raw, status, headers = err.read(), err.code, dict(err.headers)
        return status, {k.lower(): v for k, v in headers.items()}, json.loads(raw) if raw else None

    def token(self, user: str, project: str | None = None, *, system: bool = False) -> str:
        """A fresh-enough token of ``user`` scoped to ``project`` (its own by default) or
        to the system; cached per scope."""
        if not system and project is None:
            project = "admin" if user == "admin" else USERS[user][0]
        key = f"{user}/{'system' if system else project}"
        if key not in self._tokens:
            scope: dict[str, Any] = (
                {"system": {"all": True}}
                if system
                else {"project": {"name": project, "domain": {"id": "default"}}}
            )
            auth = {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {"name": user, "domain": {"id": "default"}, "password": PASSWORD}
                    },
                },
                "scope": scope,
            }
            status, headers, body = self.call("POST", "/v3/auth/tokens", {"auth": auth})
            assert status == 201, (status, body)
            self._tokens[key] = headers["x-subject-token"]
        return self._tokens[key]

    def revoke(self, token: str) -> None:
        """Revoke ``token`` (``DELETE /v3/auth/tokens``) as the admin."""
        req = urllib.request.Request(self.url + "/v3/auth/tokens", method="DELETE")
        req.add_header("x-auth-token", self.token("admin"))
        req.add_header("x-subject-token", token)
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 204, resp.status

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _manage(directory: Path, *args: str) -> subprocess.Popen[bytes]:
    """``keystone-manage ARGS`` started (each takes ~3 s of imports: run them side by side)."""
    return subprocess.Popen(
        [str(VENV / "bin" / "keystone-manage"), "--config-file", str(directory / "keystone.conf"),
         *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _finish(proc: subprocess.Popen[bytes]) -> None:
    out, _ = proc.communicate(timeout=300)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(map(str, proc.args))} failed: {out.decode()[-2000:]}")


def _synced_database(directory: Path) -> None:
    """``keystone-manage db_sync`` once per ``.venv-keystone`` (8 s on a 2-core machine),
    its SQLite file copied for every later run."""
    template = VENV / "keystone-db-synced.sqlite"
    if not template.exists():
        scratch = directory / "template"
        scratch.mkdir()
        (scratch / "keystone.conf").write_text(CONF.format(dir=scratch))
        _finish(_manage(scratch, "db_sync"))
        partial = f"{template}.{os.getpid()}.tmp"  # two runs at once each write their own
        shutil.copyfile(scratch / "keystone.db", partial)
        os.replace(partial, template)
    shutil.copyfile(template, directory / "keystone.db")


def _wait(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"keystone exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/v3", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"keystone did not answer within {timeout:.0f} s")


def start(directory: Path, port: int) -> Keystone:
    """Set Keystone up in ``directory`` and serve it on ``127.0.0.1:port``."""
    url = f"http://127.0.0.1:{port}"
    (directory / "keystone.conf").write_text(CONF.format(dir=directory))
    uid, gid = str(os.getuid()), str(os.getgid())
    fernet = _manage(directory, "fernet_setup", "--keystone-user", uid, "--keystone-group", gid)
    _synced_database(directory)
    # bootstrap loads the receipt provider, which exits when fernet-receipts holds no keys
    # yet: started beside fernet_setup, it failed whenever fernet_setup was the slower one
    _finish(fernet)
    bootstrap = _manage(
        directory, "bootstrap", "--bootstrap-password", PASSWORD,
        "--bootstrap-admin-url", f"{url}/v3", "--bootstrap-public-url", f"{url}/v3",
        "--bootstrap-internal-url", f"{url}/v3", "--bootstrap-region-id", "RegionOne",
    )
    # the server's imports (~4 s) overlap bootstrap: it reads the database per request
    log = open(directory / "keystone.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [str(VENV / "bin" / "python"), str(ROOT / "tests" / "loopback_wsgi.py"), str(port),
         "keystone.server.wsgi:initialize_public_application", "--threaded",
         "--env", f"OS_KEYSTONE_CONFIG_DIR={directory}"],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        _finish(bootstrap)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    keystone = Keystone(url, proc, directory)
    try:
        _wait(url, proc)
        _populate(keystone)
    except BaseException:
        keystone.stop()
        raise
    return keystone


def _create(ks: Keystone, path: str, kind: str, body: dict[str, Any]) -> str:
    status, _, answer = ks.call("POST", path, {kind: body}, token=ks.token("admin"))
    assert status == 201, (path, status, answer)
    return str(answer[kind]["id"])


def _role_ids(ks: Keystone) -> dict[str, str]:
    status, _, answer = ks.call("GET", "/v3/roles", token=ks.token("admin"))
    assert status == 200, answer
    return {r["name"]: r["id"] for r in answer["roles"]}


def _populate(ks: Keystone) -> None:
    """The projects, users and role assignments of the module docstring."""
    roles = _role_ids(ks)
    for name in ("service", "auditor"):
        if name not in roles:
            roles[name] = _create(ks, "/v3/roles", "role", {"name": name})
    _, _, answer = ks.call("GET", "/v3/projects?name=admin", token=ks.token("admin"))
    ks.projects["admin"] = answer["projects"][0]["id"]
    for project in ("alpha", "beta", "service"):
        ks.projects[project] = _create(
            ks, "/v3/projects", "project", {"name": project, "domain_id": "default"}
        )
    for user, (project, user_roles) in USERS.items():
        ks.users[user] = _create(
            ks, "/v3/users", "user",
            {"name": user, "domain_id": "default", "password": PASSWORD},
        )
        for role in user_roles:
            grant = f"{ks.projects[project]}/users/{ks.users[user]}/roles/{roles[role]}"
            path = f"/v3/projects/{grant}"
            status, _, answer = ks.call("PUT", path, token=ks.token("admin"))
            assert status == 204, (path, status, answer)
