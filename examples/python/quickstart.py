"""The main job from Python, on the embedded default: no server, no network, no model key.

A local context (an embedded control plane, runtime and tool host inside this process), a
Python callback tool, an instance provisioned by a job, a profile, a session, and a streamed
turn in which the runtime calls the tool; closing the context deletes what it created.

Run: pip install ./python && python examples/python/quickstart.py
"""

import asyncio

from edith_hermes import Hermes, tool


@tool
async def word_count(text: str) -> int:
    """Count the words in a text."""
    print(f"  [tool] word_count({text!r})")
    return len(text.split())


async def main() -> None:
    # 1. An embedded control plane and tool host; closed (and cleaned up) on exit.
    async with Hermes.local() as hermes:
        # 2. The callback tool, served from this process.
        registered = await hermes.register_tool(word_count)

        # 3. An instance on the embedded provider, ready once its provisioning job is done.
        instance = await hermes.instances.create("quickstart")
        print(f"instance {instance.id} {(await instance.get())['state']}")

        # 4. A profile with the tool, a session, and a turn streamed as it happens.
        profile = await instance.profiles.create("assistant", tools=[registered["id"]])
        session = await profile.sessions.create()
        turn = await session.send(
            'Please count the words with word_count {"text": "hello from the Hermes runtime"}'
        )
        answering = False
        async for event in turn.events():
            # 5. The scripted model calls the tool through the control plane's MCP endpoint.
            kind = event["type"]
            if kind == "tool.started":
                print(f"  [event] tool.started {event['name']}")
            elif kind == "tool.completed":
                print(f"  [event] tool.completed {event['name']}({event['args']}) -> {event['result']}")
            elif kind == "message.delta":
                if not answering:
                    answering = True
                    print("assistant: ", end="")
                print(event["text"], end="", flush=True)
            elif kind == "turn.finished":
                print(f"\nturn {event['state']}")
        print(f"answer: {(await turn.get())['output']}")

        # The runtime's own record of the conversation, through the profile's native namespace.
        stored = await profile.native.session.list()
        print(f"native sessions: {[s['id'] for s in stored['sessions']]}")
    # 6. Closed: the instance is deleted, the runtime stopped, the temporary data removed.


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(), timeout=120))
