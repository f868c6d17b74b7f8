"""Fixtures: a local context per test (an embedded control plane, runtime and tool host inside
the test process, on loopback, with a data dir of its own)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading

import pytest

from edith_hermes import Hermes


@pytest.fixture
async def hermes(tmp_path):
    async with Hermes.local(data_dir=tmp_path / "edith") as hermes:
        yield hermes


@pytest.fixture
async def profile(hermes):
    instance = await hermes.instances.create("tests")
    return await instance.profiles.create("assistant")


def admin_key(data_dir) -> str:
    """The first admin key the embedded control plane wrote to its data dir."""
    return (data_dir / "admin.key").read_text().strip()


TOKEN = "python-desktop-token-0123456789"

# The programs the tests launch; `scripts/python-tests` sets every one of these (our runtime,
# `edith` and the fake model, built by cargo; the real Hermes 0.19.0, from scripts/hermes-venv).
PROGRAMS = {
    "ours": "EDITH_TEST_HERMES_RUNTIME",
    "hermes": "EDITH_TEST_HERMES",
    "edith": "EDITH_TEST_EDITH",
    "fake-model": "EDITH_TEST_FAKE_MODEL",
}


def program(name: str) -> str:
    variable = PROGRAMS[name]
    found = os.environ.get(variable)
    if not found:
        pytest.fail(f"{variable} is not set: run scripts/python-tests, which sets it")
    return found


class Process:
    """A child process in a process group of its own, ready when a line of its output starts
    with `ready` (what follows is `self.ready`); waiting is bounded, and `stop()` ends the
    whole group (SIGTERM, then SIGKILL after 10 s)."""

    def __init__(
        self, argv, *, ready: str, env=None, cwd=None, timeout: float = 90, runtimes=None
    ) -> None:
        # `runtimes`: a control plane's data dir, whose `runtime.pid` files name the process
        # groups of the runtimes it started (their own groups), killed if it had to be killed.
        self.runtimes = runtimes
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        found: queue.Queue[str | None] = queue.Queue()
        seen: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                seen.append(line)
                if line.startswith(ready):
                    found.put(line[len(ready) :].strip())
            found.put(None)

        threading.Thread(target=read, daemon=True).start()
        try:
            value = found.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            pytest.fail(f"{argv[0]}: not ready within {timeout} s (hanging): {''.join(seen)[-2000:]}")
        if value is None:
            self.stop()
            pytest.fail(f"{argv[0]} exited before it was ready: {''.join(seen)[-2000:]}")
        self.ready: str = value

    def stop(self) -> None:
        """SIGTERM to the whole group, SIGKILL after 10 s (and to the runtimes it started)."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill_group(self.process.pid)
            self.process.wait(timeout=10)
            for record in (self.runtimes.rglob("runtime.pid") if self.runtimes else []):
                fields = record.read_text().split()
                if fields and fields[0].isdigit():
                    self._kill_group(int(fields[0]))
        except ProcessLookupError:
            # The leader has gone; others of its group may not have.
            self._kill_group(self.process.pid)
            self.process.wait(timeout=10)

    @staticmethod
    def _kill_group(pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def hermes_env(home) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home.parent),
        "HERMES_HOME": str(home),
        "HERMES_DASHBOARD_SESSION_TOKEN": TOKEN,
        # Hermes pip-installs missing optional packages into its own venv at run time.
        "HERMES_DISABLE_LAZY_INSTALLS": "1",
    }


@pytest.fixture(params=["ours", "hermes"])
def runtime(request, tmp_path):
    """A runtime serving on loopback, launched as the control plane launches one."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.yaml").write_text('{"approvals": {"mode": "manual"}}\n')
    started = Process(
        [program(request.param), "serve", "--host", "127.0.0.1", "--port", "0"],
        ready="HERMES_BACKEND_READY port=",
        env=hermes_env(home),
        cwd=work,
    )
    started.target = request.param
    started.url = f"http://127.0.0.1:{started.ready}"
    yield started
    started.stop()
