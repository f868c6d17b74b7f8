"""``AsyncEdithHermes``: one method per contract operation (generated from the contract),
over the Rust SDK's client — as ``hermes.sdk`` and as ``AsyncEdithHermes.remote()``."""

from __future__ import annotations

import pytest

from conftest import admin_key
from edith_hermes import ApiError, AsyncEdithHermes, ClosedError, Hermes
from edith_hermes._core import OPERATIONS


def test_every_operation_of_the_contract_has_a_method():
    bound = {name for name in dir(AsyncEdithHermes) if not name.startswith("_")}
    # The Desktop routes forwarded by the control plane are bound by their own contract.
    operations = {op for op in OPERATIONS if not op.startswith("desktop_")}
    assert operations <= bound, operations - bound


async def test_the_whole_path_through_the_low_level_client(hermes):
    sdk = hermes.sdk
    assert (await sdk.health_get())["status"] == "ok"
    created = await sdk.instance_create({"name": "low-level"})
    iid = created["instance"]["id"]
    events = [e async for e in sdk.job_events(created["job"]["id"])]
    assert events[-1]["type"] == "job.finished"
    assert events[-1]["instance_state"] == "ready"
    profile = await sdk.profile_create(iid, {"name": "assistant"})
    session = await sdk.session_create(iid, profile["id"], {})
    turn = await sdk.turn_create(iid, profile["id"], session["id"], {"input": "hello"})
    ids = (iid, profile["id"], session["id"], turn["id"])
    streamed = [e async for e in sdk.turn_events(*ids)]
    assert streamed[-1]["type"] == "turn.finished"
    assert [e async for e in sdk.turn_events(*ids, after=len(streamed) - 1)] == streamed[-1:]
    listed = await sdk.turn_list(iid, profile["id"], session["id"], state="completed")
    assert [t["id"] for t in listed["items"]] == [turn["id"]]
    page = await sdk.instance_list(limit=1)
    assert [i["id"] for i in page["items"]] == [iid]
    with pytest.raises(ApiError) as missing:
        await sdk.instance_get("inst_00000000000000000000000000000001")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with pytest.raises(ApiError) as wrong_kind:
        await sdk.instance_get(profile["id"])
    assert wrong_kind.value.code == "invalid_id"
    # An id is one segment: `..` would reach the instance itself.
    for bad in ("..", ".", "", "a/b"):
        with pytest.raises(ValueError, match="is not an id"):
            await sdk.profile_delete(iid, bad)
    assert (await sdk.instance_get(iid))["state"] == "ready"
    await sdk.instance_delete(iid)


async def test_a_remote_low_level_client_closes_and_deletes_nothing(tmp_path):
    data = tmp_path / "edith"
    async with Hermes.local(data_dir=data) as local:
        async with AsyncEdithHermes.remote(local.url, admin_key(data)) as sdk:
            created = await sdk.instance_create({"name": "kept"})
            assert sdk.base_url == local.url
        with pytest.raises(ClosedError):
            await sdk.instance_list()
        kept = await local.sdk.instance_get(created["instance"]["id"])
        assert kept["id"] == created["instance"]["id"]
