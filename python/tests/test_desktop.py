"""AsyncHermesDesktop: a runtime's Desktop routes, straight to the runtime with its token (our
runtime and the real Hermes 0.19.0, the same checks) and through the control plane."""

from __future__ import annotations

import pytest

from conftest import TOKEN
from edith_hermes import (
    AsyncHermesDesktop,
    ClosedError,
    DesktopError,
    UnsupportedError,
)


async def test_the_desktop_routes_of_a_runtime(runtime):
    async with AsyncHermesDesktop.remote(runtime.url, TOKEN) as desktop:
        status = await desktop.status_get()
        assert status["version"] == "0.19.0"
        capabilities = await desktop.capabilities()
        assert {"status", "sessions", "profiles", "cron"} <= set(capabilities["groups"])
        assert capabilities["runtime"] == ("hermes-runtime" if runtime.target == "ours" else None)

        created = await desktop.profile_create({"name": "work"})
        assert created["name"] == "work"
        names = [p["name"] for p in (await desktop.profile_list())["profiles"]]
        assert "work" in names
        work = desktop.for_profile("work")
        assert work.profile == "work"
        listed = await work.session_list()
        assert listed["sessions"] == [] and listed["total"] == 0

        with pytest.raises(DesktopError) as missing:
            await desktop.session_get("20200101_000000_abcdef")
        assert missing.value.status == 404
        assert missing.value.route == "GET /api/sessions/{session_id}"
        assert "not found" in missing.value.detail.lower()
        with pytest.raises(UnsupportedError):
            await desktop.plugin_get("no-such-plugin", "board")

        # Closing the profile's client leaves its parent open; closing the parent ends both.
        await work.close()
        with pytest.raises(ClosedError):
            await work.profile_list()
        assert (await desktop.status_get())["version"] == "0.19.0"
        other = desktop.for_profile("work")
    with pytest.raises(ClosedError):
        await other.profile_list()


async def test_a_wrong_token_is_refused(runtime):
    async with AsyncHermesDesktop.remote(runtime.url, "not-the-token") as desktop:
        with pytest.raises(DesktopError) as refused:
            await desktop.profile_list()
    assert refused.value.status == 401


async def test_an_instances_desktop_routes_through_the_control_plane(hermes, profile):
    session = await profile.sessions.create()
    await (await session.send("hello")).wait()
    native_id = (await session.get())["native_session_id"]
    desktop = profile.instance.desktop()
    listed = await desktop.session_list(profile="assistant")
    assert [s["id"] for s in listed["sessions"]] == [native_id]
    messages = await desktop.for_profile("assistant").session_messages(native_id)
    assert [m["role"] for m in messages["messages"]][:2] == ["user", "assistant"]
    written = await desktop.fs_write_text({"path": "notes.txt", "content": "from Python"})
    assert written["ok"] is True
    assert (await desktop.fs_read_text(path="notes.txt"))["text"] == "from Python"
    with pytest.raises(UnsupportedError):
        await desktop.plugin_get("kanban", "board")
    await hermes.close()
    with pytest.raises(ClosedError):
        await desktop.status_get()
