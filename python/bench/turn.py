"""One tool-calling turn on the embedded default, timed from Python: the Python side of
`scripts/bench-python` (the same turn as `examples/bench_turn.rs`). Prints one line:
`python turns=<n> median_ms=<..> p90_ms=<..>`."""

import asyncio
import sys
import time

from edith_hermes import Hermes, tool

PROMPT = 'Please count the words with word_count {"text": "hello from the Hermes runtime"}'
WARM_UP = 5


@tool
async def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())


async def bench(turns: int) -> list[float]:
    async with Hermes.local() as hermes:
        registered = await hermes.register_tool(word_count)
        instance = await hermes.instances.create("bench")
        profile = await instance.profiles.create("assistant", tools=[registered["id"]])
        times = []
        for i in range(WARM_UP + turns):
            session = await profile.sessions.create()
            started = time.perf_counter()
            turn = await session.send(PROMPT)
            last = None
            async for event in turn.events():
                last = event
            elapsed = (time.perf_counter() - started) * 1000
            if last is None or last["type"] != "turn.finished":
                raise SystemExit("a turn ended without its final event")
            if i >= WARM_UP:
                times.append(elapsed)
        return times


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    times = sorted(asyncio.run(asyncio.wait_for(bench(turns), timeout=600)))
    at = lambda q: times[round((len(times) - 1) * q)]  # noqa: E731
    print(f"python turns={turns} median_ms={at(0.5):.3f} p90_ms={at(0.9):.3f}")


if __name__ == "__main__":
    main()
