"""``placement.conf`` through oslo.config (rpquery.api.config): Placement 16.0's option names
and defaults, where files are found, the command line's overrides, and the warnings for
what rpquery does not read or does not honour; ``rpquery serve`` starting from the
configuration of Placement's install guide."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rpquery.api import config
from rpquery.api.deploy import check
from rpquery.read.candidates import CandidateOptions
from tests.serving import free_port

#: The ``placement.conf`` of Placement's install guide ("Install and configure
#: Placement"), with its placeholders filled in.
INSTALL_GUIDE = """\
[placement_database]
connection = {url}

[api]
auth_strategy = keystone

[keystone_authtoken]
auth_url = http://controller:5000/v3
memcached_servers = controller:11211
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = placement
password = PLACEMENT_PASS
"""


def write(tmp_path: Path, text: str, name: str = "placement.conf") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_placements_defaults_without_a_file(tmp_path: Path) -> None:
    settings = config.load(env={"OS_PLACEMENT_CONFIG_DIR": str(tmp_path / "none")}, files=[
        write(tmp_path, "")
    ])
    assert settings.auth_strategy == "keystone"
    assert settings.connection is None and settings.replicas == ()
    assert settings.max_replica_lag == 5.0 and not settings.sync_on_startup
    assert (settings.debug, settings.log_file, settings.cors_origins) == (False, None, ())
    assert settings.conf.oslo_policy.policy_file == "policy.yaml"
    assert settings.conf.oslo_policy.enforce_new_defaults is True
    assert settings.conf.placement.max_allocation_candidates == -1
    assert settings.warnings == ()


def test_the_install_guide_conf_is_read_without_warnings(tmp_path: Path) -> None:
    path = write(tmp_path, INSTALL_GUIDE.format(url="mysql+pymysql://p:s@controller/placement"))
    settings = config.load([path])
    assert settings.connection == "mysql+pymysql://p:s@controller/placement"
    assert settings.auth_strategy == "keystone"
    assert settings.warnings == ()
    check(settings)  # a [keystone_authtoken] section: keystone can serve


def test_os_placement_config_dir_as_placement_reads_it(tmp_path: Path) -> None:
    write(tmp_path, "[placement_database]\nconnection = sqlite:///x.db\n")
    settings = config.load(env={"OS_PLACEMENT_CONFIG_DIR": str(tmp_path)})
    assert settings.connection == "sqlite:///x.db"
    assert settings.files == (str(tmp_path / "placement.conf"),)
    with pytest.raises(config.ConfigError, match="does not exist"):
        config.load(env={"OS_PLACEMENT_CONFIG_DIR": str(tmp_path / "missing")})


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[api]\nauth_strategy = keystone\n[placement_database]\nconnection = sqlite:///a.db\n"
        "replica_connections = sqlite:///r1.db,sqlite:///r2.db\nmax_replica_lag = 2.5\n"
        "slave_connection = sqlite:///r3.db\n[DEFAULT]\ndebug = true\nlog_dir = /var/log\n"
        "log_file = placement.log\n[cors]\nallowed_origin = https://dash.example\n",
    )
    settings = config.load(
        [path],
        overrides={("api", "auth_strategy"): "noauth2",
                   ("placement_database", "connection"): "sqlite:///b.db",
                   ("placement_database", "max_replica_lag"): None},
    )
    assert (settings.auth_strategy, settings.connection) == ("noauth2", "sqlite:///b.db")
    assert settings.replicas == ("sqlite:///r1.db", "sqlite:///r2.db", "sqlite:///r3.db")
    assert settings.max_replica_lag == 2.5  # None: no override
    assert (settings.debug, settings.log_file) == (True, "/var/log/placement.log")
    assert settings.cors_origins == ("https://dash.example",)


def test_unknown_and_unhonoured_options_are_named(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[DEFAULT]\ntransport_url = rabbit://\n[placement]\n"
        "randomize_allocation_candidates = true\nmax_allocation_candidates = 1000\n"
        "allocation_candidates_generation_strategy = breadth-first\n"
        "allocation_conflict_retry_count = 10\n[oslo_policy]\nenforce_scope = true\n"
        "[profiler]\nenabled = true\n[keystone_authtoken]\nanything_the_plugin_reads = 1\n"
        "[placement_database]\nmax_pool_size = 50\nconnection = sqlite://\n",
    )
    warnings = config.load([path]).warnings
    text = "\n".join(warnings)
    assert f"{path}: [DEFAULT] transport_url: not an option" in text
    assert f"{path}: [profiler] enabled: rpquery does not read the section [profiler]" in text
    assert "[oslo_policy] enforce_scope: not an option of oslo.policy 6.0" in text
    # Placement's candidate options are honoured (CandidateOptions): no warning
    for name in ("randomize_allocation_candidates", "max_allocation_candidates",
                 "allocation_candidates_generation_strategy"):
        assert name not in text
    assert "[placement_database] max_pool_size = 50: not honoured" in text
    # at its default, an unhonoured option says nothing; [keystone_authtoken] is the
    # middleware's (it reads its auth plugin's options itself)
    assert "allocation_conflict_retry_count" not in text
    assert "keystone_authtoken" not in text
    assert len(warnings) == 4


def test_candidate_options_come_from_the_placement_section(tmp_path: Path) -> None:
    """``[placement]`` randomize / max / strategy become the app's CandidateOptions;
    any negative max is no bound (Placement's ``max_a_c >= 0`` test); a strategy
    Placement does not know is refused, as by Placement's oslo.config choices."""
    path = write(
        tmp_path,
        "[placement]\nrandomize_allocation_candidates = true\nmax_allocation_candidates = 7\n"
        "allocation_candidates_generation_strategy = breadth-first\n",
    )
    assert config.load([path]).candidate_options == CandidateOptions(
        randomize=True, max_candidates=7, strategy="breadth-first"
    )
    empty = write(tmp_path, "", "empty.conf")
    assert config.load([empty]).candidate_options == CandidateOptions()
    path = write(tmp_path, "[placement]\nmax_allocation_candidates = -20\n")
    assert config.load([path]).candidate_options.cap is None
    path = write(tmp_path, "[placement]\nallocation_candidates_generation_strategy = random\n")
    with pytest.raises(config.ConfigError, match="allocation_candidates_generation_strategy"):
        config.load([path])


def test_bad_values_name_the_option(tmp_path: Path) -> None:
    path = write(tmp_path, "[api]\nauth_strategy = kerberos\n")
    with pytest.raises(config.ConfigError, match="auth_strategy"):
        config.load([path])
    path = write(tmp_path, "[placement]\nmax_allocation_candidates = many\n")
    with pytest.raises(config.ConfigError, match="max_allocation_candidates"):
        config.load([path])


def test_keystone_without_its_section_is_refused(tmp_path: Path) -> None:
    settings = config.load([write(tmp_path, "[api]\nauth_strategy = keystone\n")])
    with pytest.raises(config.ConfigError, match=r"needs a \[keystone_authtoken\] section"):
        check(settings)


def test_placements_psycopg2_url_runs_on_psycopg(tmp_path: Path) -> None:
    url = "postgresql+psycopg2://placement:s@db/placement"
    path = write(tmp_path, f"[placement_database]\nconnection = {url}\n")
    expected = url if _has("psycopg2") else "postgresql+psycopg://placement:s@db/placement"
    assert config.load([path]).connection == expected


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_noauth2_beyond_loopback_is_warned(capsys: pytest.CaptureFixture[str]) -> None:
    from rpquery.cli.serve import _warn

    settings = config.load(overrides={("api", "auth_strategy"): "noauth2"},
                           env={"OS_PLACEMENT_CONFIG_DIR": ""})
    _warn(settings, "127.0.0.1:8778")
    assert "WARNING" not in capsys.readouterr().err
    for bind in ("0.0.0.0:8778", "[::]:8778", "10.0.0.5:8778"):
        _warn(settings, bind)
        assert f"auth_strategy noauth2 on {bind}: anyone" in capsys.readouterr().err


def test_serve_starts_from_the_install_guide_conf(sqlite_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``rpquery serve --config-file`` with the guide's file (Keystone at
    ``controller:5000`` is never reached: the root ``/`` is public, as in Placement)."""
    url = sqlite_db.url.render_as_string(hide_password=False)
    path = write(tmp_path, INSTALL_GUIDE.format(url=url))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "RPQUERY_DB_URL"}
    log = tmp_path / "serve.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rpquery", "serve", "--config-file", path,
             "--bind", f"127.0.0.1:{port}", "--workers", "1", "--access-log", "off"],
            stdout=subprocess.DEVNULL, stderr=err, env=env,
        )
    try:
        from tests.test_keystone_dropin import _wait_root, ask

        _wait_root(f"http://127.0.0.1:{port}", proc)
        status, _, body = ask(f"http://127.0.0.1:{port}", "GET", "/")
        assert status == 200 and body["versions"][0]["max_version"] == "1.39"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    stderr = log.read_text()
    assert "auth keystone" in stderr and "WARNING: configuration" not in stderr


def test_the_module_level_wsgi_application_reads_placement_conf(  # type: ignore[no-untyped-def]
    sqlite_db, tmp_path: Path
) -> None:
    """``rpquery.api.wsgi:application`` (uWSGI's ``--module``) is built from
    ``$OS_PLACEMENT_CONFIG_DIR/placement.conf`` on first access, as Placement's is; the
    factory ``create_app()`` reads the same file and the environment over it."""
    url = sqlite_db.url.render_as_string(hide_password=False)
    write(tmp_path, f"[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = {url}\n")
    probe = (
        "import json, wsgiref.util\n"
        "from rpquery.api import wsgi\n"
        "def call(app, path):\n"
        "    env = {'PATH_INFO': path, 'REQUEST_METHOD': 'GET', 'HTTP_X_AUTH_TOKEN': 'admin',\n"
        "           'HTTP_X_OPENSTACK_REQUEST_ID': 'req-00000000-0000-4000-8000-000000000000'}\n"
        "    wsgiref.util.setup_testing_defaults(env)\n"
        "    out = []\n"
        "    body = b''.join(app(env, lambda s, h, e=None: out.append((s, dict(h)))))\n"
        "    return out[0][0][:3], out[0][1].get('x-openstack-request-id', ''), body\n"
        "status, rid, body = call(wsgi.application, '/resource_providers')\n"
        "print(json.dumps([status, rid.startswith('req-'), json.loads(body),\n"
        "                  wsgi.application is wsgi.application,\n"
        "                  call(wsgi.create_app(), '/resource_providers')[0]]))\n"
    )
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(tmp_path)}
    env.pop("RPQUERY_DB_URL", None)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True).stdout
    status, has_id, body, same, factory_status = __import__("json").loads(out)
    assert (status, has_id, body, same) == ("200", True, {"resource_providers": []}, True)
    assert factory_status == "200"
    env["RPQUERY_API_AUTH"] = "keystone"  # the environment over the file: refused, no section
    failed = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                            text=True)
    assert failed.returncode != 0 and "needs a [keystone_authtoken] section" in failed.stderr


def test_cors_section_runs_oslo_middlewares_cors(sqlite_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``[cors] allowed_origin`` puts oslo.middleware's CORS in front, with Placement's
    default headers; other origins get no allow headers."""
    import wsgiref.util

    from rpquery.api.deploy import build_app

    url = sqlite_db.url.render_as_string(hide_password=False)
    path = write(tmp_path, f"[api]\nauth_strategy = noauth2\n[placement_database]\n"
                           f"connection = {url}\n[cors]\nallowed_origin = https://dash.example\n")
    app = build_app(config.load([path]))

    def preflight(origin: str) -> tuple[str, dict[str, str]]:
        env = {"PATH_INFO": "/resource_providers", "REQUEST_METHOD": "OPTIONS",
               "HTTP_ORIGIN": origin, "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "GET",
               "HTTP_ACCESS_CONTROL_REQUEST_HEADERS": "x-auth-token"}
        wsgiref.util.setup_testing_defaults(env)
        seen: list[tuple[str, dict[str, str]]] = []
        b"".join(app(env, lambda s, h, e=None: seen.append((s, {k.lower(): v for k, v in h}))))
        return seen[0]

    status, headers = preflight("https://dash.example")
    assert status.startswith("200") and headers["access-control-allow-origin"] == (
        "https://dash.example"
    )
    assert "x-auth-token" in headers["access-control-allow-headers"].lower()
    status, headers = preflight("https://evil.example")
    assert "access-control-allow-origin" not in headers
