"""A caller's ``httpx.AsyncClient`` (``http_client=``): every request goes through it, and it
stays the caller's — closing our client never closes it."""

from __future__ import annotations

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
                with pytest.raises(ApiError) as missing:
                    await sdk.instance_get("inst_00000000000000000000000000000001")
                assert missing.value.status == 404
            assert "POST /v1/instances" in seen
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
            assert len(seen) >= 5
            assert not client.is_closed


async def test_a_peer_that_is_not_there_is_a_transport_error():
    async with httpx.AsyncClient() as client:
        sdk = AsyncEdithHermes.remote("http://127.0.0.1:9", "key", http_client=client)
        with pytest.raises(TransportError) as failed:
            await sdk.instance_list()
        assert failed.value.retryable is True
        assert "key" not in str(failed.value)


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
