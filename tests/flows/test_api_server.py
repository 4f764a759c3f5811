"""The temporary Prefect API server of a command: Prefect's own server command and environment,
started without importing fairpca_dist, waited for, restarted on a taken port, stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fairpca_dist.exceptions import ServiceError
from fairpca_dist.flows import api_server
from fairpca_dist.flows.api_server import TemporaryServer

# Answers /api/health on the port given, but exits 3 (uvicorn: could not start) at its first
# start, when the marker file does not exist yet.
FAKE_SERVER = """
import http.server, os, sys
port, marker = int(sys.argv[1]), sys.argv[2]
if not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit(3)

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


class Scripted(TemporaryServer):
    """A TemporaryServer whose process runs ``code`` (with the port and ``arguments``)."""

    def __init__(self, code: str, *arguments: str) -> None:
        super().__init__()
        self.code, self.arguments, self.ports = code, arguments, []

    def command(self) -> list[str]:
        self.ports.append(self.port)
        return [sys.executable, "-c", self.code, str(self.port), *self.arguments]


def test_the_server_runs_prefects_command_and_environment(monkeypatch):
    """What Prefect's SubprocessASGIServer would run, after our watcher (python -P this file PID)."""
    import prefect.server.api.server as prefect_server

    launched = {}

    def popen(args, **options):
        launched.update(args=list(args), env=options["env"])

    monkeypatch.setattr(prefect_server.subprocess, "Popen", popen)
    prefects = prefect_server.SubprocessASGIServer(port=18765)
    try:
        prefects._run_uvicorn_command()
    finally:
        prefect_server.SubprocessASGIServer._instances.pop(18765, None)
    ours = TemporaryServer()
    ours.port = 18765
    command = ours.command()
    assert command[:4] == [sys.executable, "-P", str(Path(api_server.__file__).resolve()), str(os.getpid())]
    assert [sys.executable, *command[4:]] == launched["args"]
    prefects_environment = {name: value for name, value in launched["env"].items() if name != "PREFECT__SERVER_FINAL"}
    assert launched["env"]["PREFECT__SERVER_FINAL"] == "1"  # left out: a gc.collect() that frees nothing (api_server)
    from prefect.settings import get_current_settings

    light = api_server.light_start(get_current_settings())  # LIGHT_START, and no migration check on a current database
    assert ours.environment() == {**api_server.LIGHT_IMPORTS, **prefects_environment, **light}


def test_the_lighter_start_keeps_the_users_settings(monkeypatch):
    """LIGHT_START applies where the user has not set the setting, under any of its names."""
    monkeypatch.setenv("PREFECT_API_BLOCKS_REGISTER_ON_START", "true")  # an alias of Prefect's
    from prefect.context import SettingsContext, get_settings_context
    from prefect.settings import Settings

    # the settings as a command reads them from its environment (not those of a test harness
    # another test may have entered for the session)
    with SettingsContext(profile=get_settings_context().profile, settings=Settings()):
        environment = TemporaryServer().environment()
    assert environment["PREFECT_SERVER_REGISTER_BLOCKS_ON_START"] == "True"
    assert environment["PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION"] == "false"


def test_the_migrations_head_is_alembics():
    """The head read from the scripts' lines is the one Alembic finds in Prefect's SQLite migrations."""
    from alembic.script import ScriptDirectory
    from prefect.server.database.alembic_commands import alembic_config
    from prefect.server.database.orm_models import AioSqliteORMConfiguration

    scripts = ScriptDirectory.from_config(alembic_config())
    versions = str(AioSqliteORMConfiguration().versions_dir)
    assert [api_server.migrations_head()] == ScriptDirectory(scripts.dir, version_locations=[versions]).get_heads()


def _database(path: Path, *versions: str) -> None:
    """An SQLite file whose Alembic version table holds ``versions``."""
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        connection.executemany("INSERT INTO alembic_version VALUES (?)", [(version,) for version in versions])
    connection.close()


def test_the_migration_check_is_skipped_only_on_a_current_database(tmp_path, monkeypatch):
    """No Alembic upgrade at the start when the default database records the installed Prefect's
    head; a missing, older, ambiguous, unreadable or non-default database keeps it, and so does
    the user's own setting."""
    from prefect.settings import Settings

    head, skip = api_server.migrations_head(), {"PREFECT_SERVER_DATABASE_MIGRATE_ON_START": "false"}
    assert head is not None
    settings = Settings(home=tmp_path)
    database = tmp_path / "prefect.db"
    assert api_server.light_start(settings) == api_server.LIGHT_START  # no database yet: created and migrated
    _database(database, head)
    assert api_server.light_start(settings) == {**api_server.LIGHT_START, **skip}
    other = tmp_path / "other"
    other.mkdir()
    _database(other / "prefect.db", head)
    elsewhere = Settings(home=other, server={"database": {"connection_url": f"sqlite+aiosqlite:///{tmp_path}/x.db"}})
    assert api_server.light_start(elsewhere) == api_server.LIGHT_START  # not the home's default database
    for versions in [("0123456789ab",), (head, head), ()]:  # older, two rows, none
        database.unlink()
        _database(database, *versions)
        assert api_server.light_start(settings) == api_server.LIGHT_START
    database.write_bytes(b"not a database")
    assert api_server.light_start(settings) == api_server.LIGHT_START
    database.unlink()
    _database(database, head)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.setenv("PREFECT_API_DATABASE_MIGRATE_ON_START", "true")  # the user's, under an alias
    from prefect.context import SettingsContext, get_settings_context

    with SettingsContext(profile=get_settings_context().profile, settings=Settings()):
        assert TemporaryServer().environment()["PREFECT_SERVER_DATABASE_MIGRATE_ON_START"] == "True"


_OLDER_DATABASE = """
import asyncio
from prefect.server.database import provide_database_interface

async def older():
    database = provide_database_interface()
    await database.create_db()  # every migration, as a server's first start
    await database.run_migrations_downgrade("-1")

asyncio.run(older())
"""


def test_a_database_of_an_older_prefect_is_migrated_at_the_start(tmp_path, monkeypatch):
    """A real temporary server on a database one migration behind the installed Prefect keeps
    the migration check and upgrades it; the next start then skips the check."""
    import sqlite3

    from prefect.settings import Settings

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    for name in [name for name in os.environ if name.startswith("PREFECT_") and name != "PREFECT_HOME"]:
        monkeypatch.delenv(name)
    subprocess.run([sys.executable, "-c", _OLDER_DATABASE], check=True, capture_output=True, timeout=300)

    def version() -> list[tuple[str]]:
        with sqlite3.connect(tmp_path / "prefect.db") as connection:
            found = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        connection.close()
        return found

    head = api_server.migrations_head()
    assert version() != [(head,)]
    assert api_server.light_start(Settings()) == api_server.LIGHT_START
    server = TemporaryServer(settle=True)
    server.launch()
    try:
        assert server.settled(120) == {"configured_api": None, "new_database": False}
        server.wait(timeout=120)
    finally:
        server.stop()
    assert version() == [(head,)]
    assert api_server.light_start(Settings())["PREFECT_SERVER_DATABASE_MIGRATE_ON_START"] == "false"


@pytest.mark.parametrize("settle", [False, True])
def test_the_lighter_imports_keep_the_environments_values(monkeypatch, settle):
    """LIGHT_IMPORTS applies where the environment does not set the variable, its own value wins."""
    assert TemporaryServer(settle=settle).environment()["PY_KEY_VALUE_DISABLE_BEARTYPE"] == "true"
    monkeypatch.setenv("PY_KEY_VALUE_DISABLE_BEARTYPE", "false")
    assert TemporaryServer(settle=settle).environment()["PY_KEY_VALUE_DISABLE_BEARTYPE"] == "false"


def test_the_server_process_does_not_import_fairpca_dist(tmp_path):
    """main() runs the module (here a probe) without fairpca_dist, whose imports (dask, pandas)
    would only delay the server."""
    (tmp_path / "probe.py").write_text(
        "import sys\nprint(sys.argv[1:], sorted(m for m in sys.modules if m.startswith('fairpca_dist')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-P", api_server.__file__, str(os.getpid()), "-m", "probe", "a", "b"],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "['a', 'b'] []"


def test_a_server_that_cannot_start_on_its_port_starts_on_another(tmp_path):
    server = Scripted(FAKE_SERVER, str(tmp_path / "started-once"))
    server.launch()
    try:
        seconds = server.wait(timeout=60)
        assert seconds > 0 and len(server.ports) == 2
        process = server.process
    finally:
        server.stop()
    assert server.process is None and process is not None and process.returncode is not None


def test_a_server_that_exits_is_a_service_error():
    server = Scripted("raise SystemExit(1)")
    server.launch()
    with pytest.raises(ServiceError, match=r"temporary Prefect API server exited with status 1 before it answered"):
        server.wait(timeout=60)


def test_a_server_that_does_not_answer_in_time_is_stopped():
    server = Scripted("import time; time.sleep(60)")
    server.launch()
    process = server.process
    with pytest.raises(ServiceError, match=r"did not answer at http://127.0.0.1:\d+/api within 1 s"):
        server.wait(timeout=1)
    assert server.process is None and process is not None and process.returncode is not None


def test_flows_on_the_temporary_server_send_no_heartbeats_unless_the_user_says_so(tmp_path):
    """Inside api_server(): PREFECT_API_URL is the server's (settings and environment, for
    Prefect's own threads too) and flow heartbeats are off; a user's heartbeat setting is kept;
    on leaving, nothing of it remains. The server itself is not started (launch/wait/stop stubbed)."""
    code = textwrap.dedent(
        """
        import os
        from prefect.settings import get_current_settings
        from fairpca_dist.flows import api_server as module
        from fairpca_dist.flows.runtime import api_server

        module.TemporaryServer.launch = lambda self: setattr(self, "port", 4242)
        module.TemporaryServer.wait = lambda self, timeout: 1.5
        module.TemporaryServer.stop = lambda self: print("stopped")
        with api_server() as ready:
            server = ready()
            print(server.url, server.temporary, server.seconds, os.environ["PREFECT_API_URL"])
            print(get_current_settings().api.url, get_current_settings().flows.heartbeat_frequency)
        print(os.environ.get("PREFECT_API_URL"), get_current_settings().api.url)
        """
    )
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    url = "http://127.0.0.1:4242/api"
    for heartbeats, expected in ((None, "None"), ("60", "60")):
        extra = {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": heartbeats} if heartbeats else {}
        done = subprocess.run(
            [sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [f"{url} True 1.5 {url}", f"{url} {expected}", "stopped", "None None"]


def test_ready_does_the_commands_work_while_the_server_does_not_answer(tmp_path):
    """ready(meanwhile) calls the work given, in order, as long as the server does not answer its
    health check yet, then waits; what it did is counted apart from the wait. A server that
    answers at once gets none of it done. Stubbed: no server starts."""
    code = textwrap.dedent(
        """
        import sys, time
        from fairpca_dist.flows import api_server as module
        from fairpca_dist.flows.runtime import api_server

        healthy_after = int(sys.argv[1])  # health checks answered "not yet" before the first yes
        asked = []
        module.TemporaryServer.launch = lambda self: setattr(self, "port", 4242)
        module.TemporaryServer.answers = lambda self: asked.append(1) or len(asked) > healthy_after
        module.TemporaryServer.wait = lambda self, timeout: 1.5
        module.TemporaryServer.stop = lambda self: None
        done = []
        work = [lambda name=name: (done.append(name), time.sleep(0.05)) for name in ("kernels", "report", "more")]
        with api_server() as ready:
            server = ready(work)
            assert ready(work) is server  # once
        print(done, len(asked), server.meanwhile >= 0.05 * len(done), server.waited < 0.05)
        """
    )
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    for healthy_after, expected in (
        (2, "['kernels', 'report'] 3 True True"),
        (0, "[] 1 True True"),
        (9, "['kernels', 'report', 'more'] 3 True True"),
    ):
        run = subprocess.run(
            [sys.executable, "-c", code, str(healthy_after)], env=env, capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == expected


def test_logs_to_a_stopped_server_are_dropped_and_others_sent(monkeypatch):
    """A task outliving its interrupted flow logs after the command stopped its server: that
    line is dropped (Prefect would print '--- Error logging to API ---'); logs to any other API go."""
    from prefect.logging import handlers
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from fairpca_dist.flows import runtime

    sent = []

    class Worker:
        @classmethod
        def instance(cls):
            return cls()

        def send(self, log):
            sent.append((PREFECT_API_URL.value(), log["message"]))

    monkeypatch.setattr(handlers, "APILogWorker", Worker)
    monkeypatch.setattr(runtime, "_STOPPED_SERVERS", set())
    monkeypatch.setattr(handlers, "_api_log_sink", None)
    runtime._drop_logs_to("http://127.0.0.1:1/api")
    for url in ("http://127.0.0.1:1/api", "http://127.0.0.1:2/api"):
        with temporary_settings(updates={PREFECT_API_URL: url}):
            handlers.emit_api_log({"message": f"to {url}"})
    assert sent == [("http://127.0.0.1:2/api", "to http://127.0.0.1:2/api")]


# Serves HTTP on the port given (uvicorn's place) and prints, one per line, the requests asked for
# and the Prefect settings it was given, exiting after the last warm-up question.
RECORDING_SERVER = """
import gc, http.server, os, sys
from fairpca_dist.flows.api_server import _WARM_UP_REQUESTS

class Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        print(self.command, self.path, body, "collecting" if gc.isenabled() else "not collecting", flush=True)
        self.send_response(200)
        self.end_headers()
        if (self.command, self.path) == _WARM_UP_REQUESTS[-1]:
            names = ("PREFECT_SERVER_ANALYTICS_ENABLED", "PREFECT_SERVER_REGISTER_BLOCKS_ON_START")
            print(*(os.environ.get(name) for name in names), flush=True)
            os._exit(0)

    do_POST = do_GET

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Recorder).serve_forever()
"""


def _settling_server(tmp_path: Path, **settings: str) -> dict:
    """What a server launched with ``settle`` reported, in an environment with no Prefect setting
    but ``settings`` and a new Prefect home, running RECORDING_SERVER as its module (which prints)."""
    (tmp_path / "recording_server.py").write_text(RECORDING_SERVER)
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PYTHONPATH=str(tmp_path), **settings)
    server = TemporaryServer(settle=True)
    server.command = lambda: [
        *TemporaryServer.command(server)[:8],
        "-m",
        "recording_server",
        "--port",
        str(server.port),
    ]
    server.environment = lambda: env
    try:
        server.launch()
        report = server.settled(timeout=120)
        assert server.process is not None
        server.process.wait(timeout=120)  # RECORDING_SERVER exits after the warm-up question
    finally:
        server.stop()
    return report


# Serves HTTP on the port given (uvicorn's place); holds its answer to the last warm-up question
# until the file given exists.
HELD_SERVER = """
import http.server, os, sys, time
from fairpca_dist.flows.api_server import _WARM_UP_REQUESTS

class Held(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        while (self.command, self.path) == _WARM_UP_REQUESTS[-1] and not os.path.exists(sys.argv[1]):
            time.sleep(0.01)
        self.send_response(200)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass

port = int(sys.argv[sys.argv.index("--port") + 1])
http.server.ThreadingHTTPServer(("127.0.0.1", port), Held).serve_forever()
"""


def test_a_server_answers_once_it_is_warm(tmp_path):
    """answers() is False while the server process starts, still False once it answers its health
    check but not yet the warm-up questions, True once it has answered them; and True once the
    server process has exited (wait() then says why)."""
    (tmp_path / "held_server.py").write_text(HELD_SERVER)
    marker = tmp_path / "answer"
    server = TemporaryServer()
    server.command = lambda: [
        *TemporaryServer.command(server)[:6],
        *("-m", "held_server", str(marker), "--port", str(server.port)),
    ]
    server.environment = lambda: {**os.environ, "PYTHONPATH": str(tmp_path)}
    try:
        server.launch()
        assert not server.answers()  # starting: the interpreter has not even imported the module
        server.wait(timeout=60)  # the health check answers
        time.sleep(0.3)
        assert not server.answers()  # the last warm-up question is held
        marker.touch()
        deadline = time.monotonic() + 60
        while not server.answers() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.answers()
    finally:
        server.stop()
    server = Scripted("raise SystemExit(1)")
    server.launch()
    assert server.process is not None
    server.process.wait(timeout=60)
    assert server.answers()


def test_a_server_launched_before_prefect_settles_its_settings_and_warms_up(tmp_path, capfd):
    """Launched without Prefect's settings, the server process reads them, applies its defaults
    where the user has not set them, reports a new database, and asks its API the warm-up
    questions, in order, once it answers its health check: reads, whose POST bodies ask for one
    row. Until it answers, its garbage collector is off; from then on, on."""
    assert _settling_server(tmp_path) == {"configured_api": None, "new_database": True}
    printed = capfd.readouterr().out.splitlines()
    limit = '{"limit": 1}'
    warm_up = [
        f"{method} {path} {limit if method == 'POST' else ''} collecting"
        for method, path in api_server._WARM_UP_REQUESTS
    ]
    assert printed[-len(warm_up) - 1 :] == [*warm_up, "false false"]
    assert set(printed[: -len(warm_up) - 1]) == {"GET /api/health  not collecting"}

    _settling_server(tmp_path, PREFECT_SERVER_REGISTER_BLOCKS_ON_START="true")
    assert capfd.readouterr().out.splitlines()[-1] == "false true"  # the user's setting kept


def test_a_server_launched_before_prefect_exits_on_an_api_of_the_users(tmp_path, capfd):
    """An API named in the user's Prefect profile (not in the environment, where launched_early
    looks): the server process says so and exits without starting the server."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    (home / "profiles.toml").write_text(
        'active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n'
    )
    assert _settling_server(tmp_path) == {"configured_api": "http://127.0.0.1:9/api"}
    assert capfd.readouterr().out == ""  # the module (the server) never ran


def test_launched_early_leaves_an_api_in_the_environment_alone(monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    with api_server.launched_early() as server:
        assert server is None


def test_api_server_uses_the_server_launched_early_unless_the_users_settings_name_an_api(tmp_path):
    """runtime.api_server(launched=...) uses that server (not a new one: no launch), tells of its
    database as the server process reported it, and stops it on leaving; with an API in the
    user's settings it stops it at once and uses the user's. Stubbed: no server starts."""
    code = textwrap.dedent(
        """
        import sys
        from fairpca_dist.flows.api_server import TemporaryServer
        from fairpca_dist.flows.runtime import api_server

        class Launched(TemporaryServer):
            def launch(self):
                print("launched")
            def settled(self, timeout):
                return {"configured_api": None, "new_database": True}
            def wait(self, timeout):
                return 2.5
            def stop(self):
                print("stopped")

        server = Launched(settle=True)
        server.port = 4242
        with api_server(print, launched=server) as ready:
            print(ready().describe())
        """
    )
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    home = tmp_path / "prefect-home"
    assert done.stdout.splitlines() == [
        f"starting a temporary API server (first run: creating its database in {home}, ~10-30 s) ...",
        "temporary Prefect API server started in 2.5 s, database created (first run)",
        "stopped",
    ]
    env["PREFECT_API_URL"] = "http://127.0.0.1:9/api"  # the user's (ready() is not called: no check)
    done = subprocess.run(
        [sys.executable, "-c", code.replace("print(ready().describe())", "print('inside')")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["stopped", "inside"]
