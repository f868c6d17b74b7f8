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

# Where the runtimes are: `scripts/python-tests` sets both (our runtime, built by cargo; the
# real Hermes 0.19.0, installed by `scripts/hermes-venv`).
RUNTIMES = {"ours": "EDITH_TEST_HERMES_RUNTIME", "hermes": "EDITH_TEST_HERMES"}


class Runtime:
    """A runtime serving on loopback, launched as the control plane launches one: `serve
    --host 127.0.0.1 --port 0`, ready when it prints `HERMES_BACKEND_READY port=<n>`."""

    def __init__(self, target: str, home, work) -> None:
        variable = RUNTIMES[target]
        program = os.environ.get(variable)
        if not program:
            pytest.fail(f"{variable} is not set: run scripts/python-tests, which sets it")
        (home / "config.yaml").write_text('{"approvals": {"mode": "manual"}}\n')
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home.parent),
            "HERMES_HOME": str(home),
            "HERMES_DASHBOARD_SESSION_TOKEN": TOKEN,
            "HERMES_DISABLE_LAZY_INSTALLS": "1",
        }
        self.process = subprocess.Popen(
            [program, "serve", "--host", "127.0.0.1", "--port", "0"],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.port = self._wait_ready(timeout=90)
        self.url = f"http://127.0.0.1:{self.port}"

    def _wait_ready(self, timeout: float) -> int:
        found: queue.Queue[str] = queue.Queue()
        seen: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                seen.append(line)
                if "HERMES_BACKEND_READY port=" in line:
                    found.put(line.split("port=", 1)[1].split()[0])
            found.put("")

        threading.Thread(target=read, daemon=True).start()
        try:
            port = found.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            pytest.fail(f"not ready within {timeout} s (hanging): {''.join(seen)[-2000:]}")
        if not port:
            self.stop()
            pytest.fail(f"exited before it was ready: {''.join(seen)[-2000:]}")
        return int(port)

    def stop(self) -> None:
        """SIGTERM to its process group, then SIGKILL after 10 s."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass


@pytest.fixture(params=["ours", "hermes"])
def runtime(request, tmp_path):
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    started = Runtime(request.param, home, work)
    started.target = request.param
    yield started
    started.stop()
