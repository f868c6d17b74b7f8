"""Handles, ownership and closing, as the seed says them."""

from __future__ import annotations

import asyncio

import pytest

from conftest import admin_key
from edith_hermes import ApiError, ClosedError, EdithError, Hermes, NotReadyError, TransportError


async def test_handles_are_built_without_a_request():
    # Nothing listens on port 9: building handles works, fetching fails on the transport.
    hermes = Hermes.remote("http://127.0.0.1:9", "key")
    profile = hermes.instances("inst_00000000000000000000000000000001").profiles(
        "prof_00000000000000000000000000000002"
    )
    session = profile.sessions("sess_00000000000000000000000000000003")
    assert profile.id == "prof_00000000000000000000000000000002"
    assert profile.instance.id == "inst_00000000000000000000000000000001"
    assert session.id == "sess_00000000000000000000000000000003"
    with pytest.raises(TransportError) as failed:
        await profile.get()
    assert failed.value.retryable is True
    await hermes.close()


async def test_an_id_of_the_wrong_kind_is_refused_at_once(hermes):
    with pytest.raises(ValueError, match="inst_"):
        hermes.instances("prof_00000000000000000000000000000002")


async def test_an_unknown_instance_is_a_404_with_a_stable_code(hermes):
    with pytest.raises(ApiError) as missing:
        await hermes.instances("inst_00000000000000000000000000000001").get()
    assert missing.value.status == 404
    assert missing.value.code == "not_found"
    assert missing.value.retryable is False
    assert isinstance(missing.value, EdithError)


async def test_a_local_context_must_be_started_before_use():
    hermes = Hermes.local()
    with pytest.raises(EdithError, match="async with Hermes.local"):
        hermes.instances
    await hermes.close()  # never started: nothing to do


async def test_closing_deletes_what_the_context_created_unless_told_not_to(tmp_path):
    data = tmp_path / "edith"
    async with Hermes.local(data_dir=data) as first:
        kept = await first.instances.create("kept")
    # Deleted at close: the next context on the same data finds none.
    async with Hermes.local(data_dir=data) as second:
        with pytest.raises(ApiError) as gone:
            await second.instances(kept.id).get()
        assert gone.value.status == 404

    async with Hermes.local(data_dir=data, cleanup=False) as third:
        kept = await third.instances.create("kept")
    async with Hermes.local(data_dir=data) as fourth:
        # open_instance attaches without owning it: closing this context leaves it.
        attached = await fourth.open_instance(kept.id)
        assert (await attached.get())["state"] == "ready"
        profile = await attached.profiles.create("assistant")
        session = await profile.sessions.create()
        finished = await (await session.send("hello")).wait()
        assert finished["state"] == "completed"
    async with Hermes.local(data_dir=data) as fifth:
        assert (await fifth.instances(kept.id).get())["state"] == "ready"
        await fifth.instances(kept.id).delete()
        listed = await fifth.instances.list()
        assert listed["items"] == []


async def test_a_remote_client_never_deletes_and_fails_clearly_once_closed(tmp_path):
    data = tmp_path / "edith"
    async with Hermes.local(data_dir=data) as local:
        async with Hermes.remote(local.url, admin_key(data)) as remote:
            made = await remote.instances.create("remote")
            assert (await made.get())["state"] == "ready"
            assert remote.data_dir is None
        assert (await local.instances(made.id).get())["state"] == "ready"
        with pytest.raises(ClosedError):
            await remote.instances(made.id).get()
        listed = await local.instances.list()
        assert [item["id"] for item in listed["items"]] == [made.id]


async def test_a_remote_client_without_a_key_is_told_so(hermes):
    async with Hermes.remote(hermes.url) as anonymous:
        with pytest.raises(ApiError) as refused:
            await anonymous.instances.list()
    assert refused.value.status == 401


async def test_instances_are_listed_by_state_and_label(hermes):
    labelled = await hermes.instances.create("a", labels={"team": "red"})
    await hermes.instances.create("b", labels={"team": "blue"})
    red = await hermes.instances.list(label="team=red")
    assert [item["id"] for item in red["items"]] == [labelled.id]
    ready = await hermes.instances.list(state="ready", limit=1)
    assert len(ready["items"]) == 1 and ready["next_cursor"]


async def test_a_creation_spec_is_checked_by_the_contracts_type(hermes):
    with pytest.raises(ValueError, match="colour"):
        await hermes.instances.create("x", colour="red")


async def test_an_unknown_runtime_is_refused_with_the_known_ones(hermes):
    with pytest.raises(ApiError) as refused:
        await hermes.instances.create("p", provider="process", runtime="nonesuch")
    assert refused.value.status == 400
    # A local context runs only its embedded runtime: the message says how runtimes are added.
    assert "edith serve --runtime NAME=COMMAND" in refused.value.detail


async def test_an_instance_that_never_becomes_ready_is_a_not_ready_error(hermes):
    # Nothing listens on the discard port: provisioning the external runtime fails.
    with pytest.raises(NotReadyError) as failed:
        await hermes.instances.create(
            "nowhere", provider="external", url="http://127.0.0.1:9", token="tok_nowhere"
        )
    assert failed.value.instance.startswith("inst_")
    assert failed.value.reason
    assert "tok_nowhere" not in str(failed.value)
    state = (await hermes.instances(failed.value.instance).get())["state"]
    assert state == "failed"


async def test_what_the_control_plane_offers(hermes):
    offered = await hermes.capabilities()
    assert "embedded" in offered["providers"]
    assert offered["native_catalog"] == "0.19.0"


async def test_an_instance_can_be_created_without_waiting(hermes):
    instance = await hermes.instances.create("later", wait=False)
    for _ in range(200):
        state = (await instance.get())["state"]
        if state == "ready":
            break
        assert state == "provisioning"
        await asyncio.sleep(0.05)
    assert state == "ready"


async def test_a_context_closed_while_it_starts_does_not_run_on(tmp_path):
    hermes = Hermes.local(data_dir=tmp_path / "edith")
    starting = asyncio.ensure_future(hermes.start())
    await hermes.close()
    with pytest.raises(ClosedError, match="while it was starting"):
        await starting
    with pytest.raises(ClosedError):
        await hermes.instances.list()


async def test_an_explicit_start_and_close(tmp_path):
    hermes = Hermes.local(data_dir=tmp_path / "edith")
    assert await hermes.start() is hermes
    assert await hermes.start() is hermes  # a no-op once started
    await hermes.instances.create("explicit")
    await hermes.close()
    await hermes.close()  # a no-op
    with pytest.raises(ClosedError):
        await hermes.instances.list()


async def test_closing_hermes_sdk_leaves_its_context_working(tmp_path):
    data = tmp_path / "edith"
    async with Hermes.local(data_dir=data) as hermes:
        async with hermes.sdk as sdk:
            assert (await sdk.health_get())["status"] == "ok"
        with pytest.raises(ClosedError):
            await sdk.health_get()
        made = await hermes.instances.create("still-open")
    # The context closed cleanly and deleted what it made.
    async with Hermes.local(data_dir=data) as again:
        assert (await again.instances.list())["items"] == []
        with pytest.raises(ApiError):
            await again.instances(made.id).get()


async def test_a_key_with_a_control_character_is_refused_without_being_echoed():
    secret = "edk_distinctive_secret_0123456789\n"
    with pytest.raises(ValueError) as refused:
        Hermes.remote("http://127.0.0.1:9", secret)
    assert "distinctive_secret" not in str(refused.value)
    assert "trailing newline" in str(refused.value)
