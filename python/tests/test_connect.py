"""profile.connect(): a persistent connection to the profile's native gateway, relayed by the
control plane — native events in order, requests, and an approval answered on it."""

from __future__ import annotations

import json

import pytest

from edith_hermes import NativeError


async def until(connection, kind: str) -> dict:
    async for event in connection:
        if event["type"] == kind:
            return event
    pytest.fail(f"the connection ended before {kind}: {connection.ended}")


async def test_a_connection_relays_native_events_and_answers_an_approval(profile, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    command = f"rm -rf {victim}"
    async with await profile.connect() as connection:
        created = await connection.native.session.create()
        assert connection.id, "the relay named the connection"
        session_id = created["session_id"]
        await connection.native.prompt.submit(
            session_id=session_id, text="terminal " + json.dumps({"command": command})
        )
        asked = await until(connection, "approval.request")
        assert asked["session_id"] == session_id
        assert command in json.dumps(asked)
        await connection.native.approval.respond(session_id=session_id, choice="deny")
        await until(connection, "message.complete")
        assert victim.exists(), "denied, so nothing ran"

        with pytest.raises(ValueError, match="not a method of the pinned"):
            await connection.call("no.such_method")
        with pytest.raises(NativeError) as refused:
            await connection.native.prompt.submit(session_id="nope", text="hi")
        assert refused.value.code is not None
    assert connection.ended is not None
    with pytest.raises(NativeError):
        await connection.native.session.create()


async def test_a_question_is_answered_on_the_connection(profile):
    async with await profile.connect() as connection:
        session_id = (await connection.native.session.create())["session_id"]
        await connection.native.prompt.submit(
            session_id=session_id,
            text='clarify {"question": "Which colour?", "choices": ["red", "blue"]}',
        )
        asked = (await until(connection, "clarify.request"))["payload"]
        assert (asked["question"], asked["choices"]) == ("Which colour?", ["red", "blue"])
        await connection.native.clarify.respond(request_id=asked["request_id"], answer="blue")
        done = await until(connection, "message.complete")
        assert "blue" in json.dumps(done)
