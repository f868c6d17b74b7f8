"""The real Hermes 0.19.0 behind a separately started control plane (`edith serve --runtime
hermes=…`, a `process` instance): a Python tool, served by a ToolHost, called in a turn."""

from __future__ import annotations

import os
import secrets

import pytest

from conftest import Process, program
from edith_hermes import Hermes, ToolHost, tool


@tool
async def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


@pytest.fixture
def fake_model():
    model = Process([program("fake-model")], ready="FAKE_MODEL_READY url=", timeout=30)
    yield model.ready
    model.stop()


@pytest.fixture
def control_plane(tmp_path):
    key = "edk_" + secrets.token_hex(16)
    # The form: the command that serves, `hermes serve`.
    hermes = f"env HERMES_DISABLE_LAZY_INSTALLS=1 {program('hermes')} serve"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "EDITH_API_KEY": key}
    server = Process(
        [program("edith"), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
         "--runtime", f"hermes={hermes}"],
        ready="EDITH_READY url=",
        env=env,
        timeout=60,
        runtimes=tmp_path / "data",
    )
    yield server.ready, key
    server.stop()


@pytest.mark.timeout(300)
async def test_the_real_hermes_calls_a_python_tool(control_plane, fake_model):
    url, key = control_plane
    async with Hermes.remote(url, key) as hermes, ToolHost() as host:
        host.add(word_count)
        registered = await hermes.register_tool_host(host)
        instance = await hermes.instances.create("real", provider="process", runtime="hermes")
        assert (await instance.capabilities())["runtime"] == "hermes"
        model = {"provider": "openai_compatible", "base_url": fake_model, "model": "fake-model",
                 "api_key": "sk-fake-0123456789"}
        # Hermes 0.19 offers callback tools to the default profile's sessions (docs/runtimes.md).
        profile = await instance.profiles.create(
            "default", tools=[t["id"] for t in registered], model=model
        )
        session = await profile.sessions.create()
        turn = await session.send('CALL word_count {"text": "one two three"}')
        events = [event async for event in turn.events()]
        completed = [e for e in events if e["type"] == "tool.completed"]
        assert [(e["name"], e["result"]) for e in completed] == [("word_count", 3)], events
        finished = await turn.get()
        assert finished["state"] == "completed", finished
        await instance.delete()
