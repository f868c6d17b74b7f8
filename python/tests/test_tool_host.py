"""Python tools for a remote control plane: a ToolHost served on its own, registered with its
secret, called by the runtime through the control plane; unreachable once it stops."""

from __future__ import annotations

import json

import pytest

from conftest import admin_key
from edith_hermes import ClosedError, EdithError, Hermes, ToolHost, tool

PROMPT = 'word_count {"text": "one two three"}'


@tool
async def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


async def test_a_remote_control_plane_calls_tools_served_by_a_tool_host(tmp_path):
    data = tmp_path / "edith"
    # The control plane runs elsewhere as far as this client knows: it speaks to it remotely.
    async with Hermes.local(data_dir=data) as control_plane:
        async with Hermes.remote(control_plane.url, admin_key(data)) as hermes:
            async with ToolHost() as host:
                host.add(word_count)
                assert host.url.startswith("http://127.0.0.1:")
                registered = await hermes.register_tool_host(host)
                assert [t["name"] for t in registered] == ["word_count"]
                assert host.secret not in json.dumps(registered), "the secret is never returned"

                instance = await hermes.instances.create("remote-tools")
                profile = await instance.profiles.create(
                    "assistant", tools=[t["id"] for t in registered]
                )
                session = await profile.sessions.create()
                events = [e async for e in (await session.send(PROMPT)).events()]
                completed = next(e for e in events if e["type"] == "tool.completed")
                assert completed["result"] == 3

            # The host stopped: the runtime's next call cannot reach it, and the turn says so.
            events = [e async for e in (await session.send(PROMPT)).events()]
            completed = next(e for e in events if e["type"] == "tool.completed")
            assert "unreachable" in completed["result"]["error"]
            assert events[-1]["type"] == "turn.finished"
            await instance.delete()


async def test_a_tool_host_is_used_only_while_it_serves():
    host = ToolHost()
    with pytest.raises(EdithError, match="not serving yet"):
        host.url
    async with host:
        assert host.secret
    with pytest.raises(ClosedError):
        host.add(word_count)
    with pytest.raises(ValueError, match="not an IP address"):
        ToolHost(host="localhost")


async def test_tools_of_a_local_context_are_unreachable_once_it_exits(tmp_path):
    calls: list[str] = []

    @tool
    def counted(text: str) -> int:
        """Count the words in a text."""
        calls.append(text)
        return len(text.split())

    prompt = 'counted {"text": "one two three"}'
    data = tmp_path / "edith"
    async with Hermes.local(data_dir=data, cleanup=False) as first:
        registered = await first.register_tool(counted)
        instance = await first.instances.create("kept")
        profile = await instance.profiles.create("assistant", tools=[registered["id"]])
        session = await profile.sessions.create()
        events = [e async for e in (await session.send(prompt)).events()]
        assert next(e for e in events if e["type"] == "tool.completed")["result"] == 3
    assert calls == ["one two three"]
    # The instance stayed; the tool host that served the tool went with its context, so the
    # next turn cannot reach the function.
    async with Hermes.local(data_dir=data) as second:
        again = second.instances(instance.id).profiles(profile.id).sessions(session.id)
        turn = await again.send(prompt)
        finished = await turn.wait()
        assert finished["state"] == "completed"
        assert calls == ["one two three"]
        completed = [e async for e in turn.events() if e["type"] == "tool.completed"]
        assert "tool host unreachable" in str(completed[0]["result"]), completed
        await second.instances(instance.id).delete()
