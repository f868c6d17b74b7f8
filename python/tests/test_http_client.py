"""A caller's ``httpx.AsyncClient`` (``http_client=``): every request goes through it, and it
stays the caller's — closing our client never closes it."""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
import pytest

from conftest import TOKEN, admin_key
from edith_hermes import (
    ApiError,
    AsyncEdithHermes,
    AsyncHermesDesktop,
    ClosedError,
    Hermes,
    TransportError,
)


def counting_client() -> tuple[httpx.AsyncClient, list[str]]:
    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        seen.append(f"{request.method} {request.url.path}")

    return httpx.AsyncClient(event_hooks={"request": [record]}), seen


async def test_the_low_level_client_sends_through_the_callers_client(tmp_path):
    data = tmp_path / "edith"
    async with Hermes.local(data_dir=data) as local:
        client, seen = counting_client()
        async with client:
            async with AsyncEdithHermes.remote(local.url, admin_key(data), http_client=client) as sdk:
                created = await sdk.instance_create({"name": "via-httpx"})
                job = [e async for e in sdk.job_events(created["job"]["id"])]
                assert job[-1]["instance_state"] == "ready"
                iid = created["instance"]["id"]
                profile = await sdk.profile_create(iid, {"name": "assistant"})
                session = await sdk.session_create(iid, profile["id"], {})
                turn = await sdk.turn_create(iid, profile["id"], session["id"], {"input": "hi"})
                ids = (iid, profile["id"], session["id"], turn["id"])
                events = [e async for e in sdk.turn_events(*ids)]
                assert events[-1]["type"] == "turn.finished"
                # A turn streamed in the POST that starts it, through the caller's client.
                streamed = [
                    e
                    async for e in await sdk.turn_create_stream(
                        iid, profile["id"], session["id"], {"input": "hi"}
                    )
                ]
                assert [e["type"] for e in streamed] == [e["type"] for e in events]
                assert streamed[0]["turn_id"] != turn["id"]
                with pytest.raises(ApiError) as missing:
                    await sdk.instance_get("inst_00000000000000000000000000000001")
                assert missing.value.status == 404
            assert "POST /v1/instances" in seen
            assert any(s.endswith("/turns/stream") for s in seen), seen
            assert any(s.endswith("/events") for s in seen), seen
            # Ours is closed; the caller's client is not, and still works.
            with pytest.raises(ClosedError):
                await sdk.instance_list()
            assert not client.is_closed
            assert (await client.get(f"{local.url}/healthz")).status_code == 200


async def test_hermes_remote_sends_through_the_callers_client(tmp_path):
    data = tmp_path / "edith"
    async with Hermes.local(data_dir=data) as local:
        client, seen = counting_client()
        async with client:
            async with Hermes.remote(local.url, admin_key(data), http_client=client) as hermes:
                instance = await hermes.instances.create("via-httpx")
                profile = await instance.profiles.create("assistant")
                session = await profile.sessions.create()
                finished = await (await session.send("hello")).wait()
                assert finished["state"] == "completed"
            # Every call went through it: create, the job's events, profile, session, turn,
            # the turn's events, and the turn read back.
            assert [s.split(" ")[0] for s in seen].count("POST") >= 4
            assert sum(s.endswith("/events") for s in seen) == 2, seen
            assert not client.is_closed


async def test_a_peer_that_is_not_there_is_a_transport_error():
    async with httpx.AsyncClient() as client:
        secret = "edk_distinctive_secret_0123456789"
        sdk = AsyncEdithHermes.remote("http://127.0.0.1:9", secret, http_client=client)
        with pytest.raises(TransportError) as failed:
            await sdk.instance_list()
        assert failed.value.retryable is True
        assert "distinctive_secret" not in str(failed.value)


async def test_desktop_sends_through_the_callers_client(runtime):
    client, seen = counting_client()
    async with client:
        desktop = AsyncHermesDesktop.remote(runtime.url, TOKEN, http_client=client)
        assert (await desktop.status_get())["version"] == "0.19.0"
        profiles = await desktop.for_profile("default").profile_list()
        assert "profiles" in profiles
        await desktop.close()
        assert seen == ["GET /api/status", "GET /api/profiles"]
        assert not client.is_closed
        assert (await client.get(f"{runtime.url}/api/status")).status_code == 200


async def test_a_quiet_event_stream_over_the_callers_client_is_not_dropped(tmp_path):
    """httpx's default read timeout (5 s) is shorter than the control plane's keep-alive
    (15 s): a turn that waits quietly must still be followed on one request."""
    victim = tmp_path / "victim"
    victim.mkdir()
    data = tmp_path / "edith"
    async with Hermes.local(data_dir=data) as local:
        client, seen = counting_client()
        async with client, Hermes.remote(local.url, admin_key(data), http_client=client) as hermes:
            instance = await hermes.instances.create("quiet")
            profile = await instance.profiles.create("assistant")
            session = await profile.sessions.create()
            turn = await session.send("terminal " + json.dumps({"command": f"rm -rf {victim}"}))
            # Read the stream throughout, as an application waiting on it does.
            following = asyncio.ensure_future(_all(turn.events()))
            for _ in range(200):
                if (await turn.get())["state"] == "requires_action":
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(12)  # quiet: nothing happens until the approval
            await turn.approve("once")
            events = await asyncio.wait_for(following, 60)
            assert [e["type"] for e in events].count("approval.requested") == 1
            assert events[-1]["state"] == "completed"
            turn_streams = [s for s in seen if "/turns/" in s and s.endswith("/events")]
            assert len(turn_streams) == 1, seen


async def _all(events) -> list:
    return [event async for event in events]


async def test_a_callers_hooks_that_raise_for_the_status(tmp_path):
    data = tmp_path / "edith"

    async def read_then_raise(response: httpx.Response) -> None:
        await response.aread()
        response.raise_for_status()

    async def raise_unread(response: httpx.Response) -> None:
        response.raise_for_status()

    missing = "inst_00000000000000000000000000000001"
    async with Hermes.local(data_dir=data) as local:
        # A hook that read the reply: the problem is the control plane's.
        async with httpx.AsyncClient(event_hooks={"response": [read_then_raise]}) as client:
            sdk = AsyncEdithHermes.remote(local.url, admin_key(data), http_client=client)
            with pytest.raises(ApiError) as refused:
                await sdk.instance_get(missing)
            assert (refused.value.status, refused.value.code) == (404, "not_found")
        # One that did not: the reply is lost, and the error says why.
        async with httpx.AsyncClient(event_hooks={"response": [raise_unread]}) as client:
            sdk = AsyncEdithHermes.remote(local.url, admin_key(data), http_client=client)
            with pytest.raises(TransportError, match="response hook") as hooked:
                await sdk.instance_get(missing)
            assert hooked.value.retryable is False


async def test_a_desktop_token_with_a_control_character_is_refused_unechoed():
    with pytest.raises(ValueError) as refused:
        AsyncHermesDesktop.remote("http://127.0.0.1:9", "tok_distinctive_secret\n")
    assert "distinctive_secret" not in str(refused.value)


class CountingTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, counting the replies it handed out and nobody closed yet."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.open = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        self.open += 1
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Counted(self, response),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Counted(httpx.AsyncByteStream):
    def __init__(self, transport: CountingTransport, response: httpx.Response) -> None:
        self.transport = transport
        self.response = response
        self.closed = False

    async def __aiter__(self):
        async for chunk in self.response.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            self.transport.open -= 1
        await self.response.aclose()


async def test_cancelled_calls_close_every_reply_they_opened(tmp_path):
    """A call cancelled at any point (before the request left, while the reply is on its way,
    while its body is read) leaves no reply open on the caller's client, so its connection
    goes back to the pool. (Whether httpx's pool then reuses it is httpx's business: a
    cancellation at the wrong moment inside httpcore 1.0.9 can strand a connection slot on its
    own, encode/httpcore#1093, which is why this counts replies rather than starving a pool.)"""
    data = tmp_path / "edith"
    transport = CountingTransport()
    async with Hermes.local(data_dir=data) as local:
        async with httpx.AsyncClient(transport=transport) as client:
            sdk = AsyncEdithHermes.remote(local.url, admin_key(data), http_client=client)
            cancelled = 0
            for _ in range(3):
                for delay_ms in (0, 1, 2, 5, 10, 20):
                    call = asyncio.ensure_future(sdk.instance_list())
                    await asyncio.sleep(delay_ms / 1000)
                    call.cancel()
                    try:
                        await call
                    except asyncio.CancelledError:
                        cancelled += 1
                    await _until(lambda: transport.open == 0)
            assert cancelled >= 6
            # An event stream left before its end closes its reply too.
            created = await sdk.instance_create({"name": "left"})
            events = sdk.job_events(created["job"]["id"])
            following = asyncio.ensure_future(events.__anext__())
            await asyncio.sleep(0.01)
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await following
            del events, following
            await _until(lambda: transport.open == 0)
            assert (await sdk.instance_list())["items"][0]["name"] == "left"


async def _until(condition, seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    assert condition(), "still not so after the wait"
