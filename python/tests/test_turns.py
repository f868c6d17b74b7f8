"""The seed's main flow from Python: a callback tool, an instance, a profile, a session and a
streamed turn in which the runtime calls the tool; approvals, questions and cancel."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from edith_hermes import ApiError, tool

PROMPT = 'Please count the words with word_count {"text": "hello from the Hermes runtime"}'


async def events_of(turn) -> list[dict]:
    return [event async for event in turn.events()]


async def test_a_turn_streams_its_events_and_the_runtime_calls_a_python_tool(hermes):
    seen: list[str] = []

    @tool
    async def word_count(text: str) -> int:
        """Count the words in a text."""
        seen.append(text)
        return len(text.split())

    registered = await hermes.register_tool(word_count)
    assert registered["name"] == "word_count"
    assert registered["input_schema"]["required"] == ["text"]
    instance = await hermes.instances.create("tools")
    profile = await instance.profiles.create("assistant", tools=[registered["id"]])
    session = await profile.sessions.create()
    turn = await session.send(PROMPT)

    events = await events_of(turn)
    kinds = [event["type"] for event in events]
    assert kinds[:4] == ["turn.started", "message.started", "tool.started", "tool.completed"]
    assert kinds[-2:] == ["message.completed", "turn.finished"]
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    completed = events[3]
    assert completed["args"] == {"text": "hello from the Hermes runtime"}
    assert completed["result"] == 5
    assert seen == ["hello from the Hermes runtime"]
    text = "".join(e["text"] for e in events if e["type"] == "message.delta")
    # Like Hermes, the first text streamed after a tool batch opens a new paragraph.
    assert text == "\n\nword_count returned 5."
    finished = await turn.get()
    assert finished["state"] == "completed"
    assert finished["output"] == "word_count returned 5."

    # Resuming after an event gives exactly the tail.
    tail = [event async for event in turn.events(after=7)]
    assert tail == events[7:]

    # A turn streamed in the request that starts it: the same log, named by its events.
    streamed = [event async for event in await session.stream(PROMPT)]
    assert [event["type"] for event in streamed] == kinds
    again = session.turn(streamed[0]["turn_id"])
    assert await events_of(again) == streamed
    assert (await again.get())["output"] == "word_count returned 5."
    assert seen == ["hello from the Hermes runtime"] * 2


async def test_a_plain_function_runs_off_the_event_loop(hermes):
    """A plain `def` tool runs in a worker thread: the loop keeps running while it works."""
    release = threading.Event()
    ticks = 0

    @tool
    def word_count(text: str) -> int:
        """Count the words in a text."""
        assert release.wait(30), "the test never released the tool"
        return len(text.split())

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            if ticks == 5:
                release.set()
            await asyncio.sleep(0.01)

    registered = await hermes.register_tool(word_count)
    instance = await hermes.instances.create("threads")
    profile = await instance.profiles.create("assistant", tools=[registered["id"]])
    session = await profile.sessions.create()
    ticking = asyncio.create_task(ticker())
    try:
        finished = await (await session.send(PROMPT)).wait()
    finally:
        ticking.cancel()
    assert finished["output"] == "word_count returned 5."
    assert ticks >= 5


async def test_a_failing_tool_tells_the_model_why(hermes):
    @tool
    def word_count(text: str) -> int:
        """Count the words in a text."""
        raise RuntimeError("the counter is broken")

    registered = await hermes.register_tool(word_count)
    instance = await hermes.instances.create("failing")
    profile = await instance.profiles.create("assistant", tools=[registered["id"]])
    session = await profile.sessions.create()
    turn = await session.send(PROMPT)
    events = await events_of(turn)
    completed = next(e for e in events if e["type"] == "tool.completed")
    assert "RuntimeError: the counter is broken" in json.dumps(completed["result"])
    assert events[-1]["type"] == "turn.finished"


async def test_an_approval_is_answered_and_the_command_runs(profile, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    session = await profile.sessions.create()
    command = f"rm -rf {victim}"
    turn = await session.send("terminal " + json.dumps({"command": command}))
    events = turn.events()
    async for event in events:
        if event["type"] == "approval.requested":
            break
    else:
        pytest.fail("the turn never asked for an approval")
    assert (await turn.get())["state"] == "requires_action"
    assert victim.exists(), "not run before the approval"
    await turn.approve("once")
    rest = [event async for event in events]
    assert rest[-1]["type"] == "turn.finished"
    assert rest[-1]["state"] == "completed"
    assert not victim.exists(), "approved, so it ran"
    with pytest.raises(ApiError) as refused:
        await turn.approve("once")
    assert refused.value.status == 409
    assert refused.value.code == "conflict"


async def test_a_cancelled_turn_ends_cancelled_and_denies_its_approval(profile, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    session = await profile.sessions.create()
    turn = await session.send("terminal " + json.dumps({"command": f"rm -rf {victim}"}))
    async for event in turn.events():
        if event["type"] == "approval.requested":
            break
    await turn.cancel()
    finished = await turn.wait()
    assert finished["state"] == "cancelled"
    assert victim.exists()


async def test_an_unknown_approval_choice_is_refused_before_any_request(profile):
    session = await profile.sessions.create()
    turn = session.turn("turn_00000000000000000000000000000000")
    with pytest.raises(ValueError, match="maybe"):
        await turn.approve("maybe")


async def test_a_question_is_answered(profile):
    session = await profile.sessions.create()
    turn = await session.send('clarify {"question": "Which colour?", "choices": ["red", "blue"]}')
    events = turn.events()
    async for event in events:
        if event["type"] == "clarify.requested":
            break
    else:
        pytest.fail("the turn never asked")
    assert (event["question"], event["choices"]) == ("Which colour?", ["red", "blue"])
    await turn.answer(event["request_id"], "blue")
    rest = [e async for e in events]
    assert rest[-1]["type"] == "turn.finished" and rest[-1]["state"] == "completed"
    assert "blue" in rest[-1]["output"]


async def test_a_tool_attached_later_and_a_changed_model(hermes):
    @tool
    def word_count(text: str) -> int:
        """Count the words in a text."""
        return len(text.split())

    registered = await hermes.register_tool(word_count)
    instance = await hermes.instances.create("later-tools")
    profile = await instance.profiles.create("assistant")
    attached = await profile.attach_tool(registered["id"])
    assert attached["tools"] == [registered["id"]]
    finished = await (await (await profile.sessions.create()).send(PROMPT)).wait()
    assert finished["output"] == "word_count returned 5."
    changed = await profile.set_model({"provider": "scripted"})
    assert changed["model"] == {"provider": "scripted"}
    with pytest.raises(ValueError, match="nonesuch"):
        await profile.set_model({"provider": "nonesuch"})
