"""Native gateway methods through the control plane, named by the pinned catalog, and native
sessions resumed in control-plane sessions."""

from __future__ import annotations

import pytest

from edith_hermes import ApiError, UnsupportedError
from edith_hermes._core import NATIVE_METHODS


async def stored_sessions(profile) -> dict[str, dict]:
    listed = await profile.native.session.list()
    return {session["id"]: session for session in listed["sessions"]}


async def test_a_profiles_native_sessions_are_its_own(hermes):
    instance = await hermes.instances.create("native")
    first = await instance.profiles.create("first")
    second = await instance.profiles.create("second")
    session = await first.sessions.create()
    await (await session.send("hello")).wait()
    native_id = (await session.get())["native_session_id"]
    assert native_id in await stored_sessions(first)
    assert await stored_sessions(second) == {}


async def test_a_stored_native_session_is_resumed_and_continued(profile):
    session = await profile.sessions.create()
    await (await session.send("my name is Ada")).wait()
    native_id = (await session.get())["native_session_id"]
    before = (await stored_sessions(profile))[native_id]["message_count"]

    resumed = await profile.sessions.create(resume_native_session_id=native_id)
    assert resumed.id != session.id
    assert (await resumed.get())["native_session_id"] == native_id
    finished = await (await resumed.send("what is my name?")).wait()
    assert finished["state"] == "completed"
    # The turn went on in the same stored conversation.
    assert (await stored_sessions(profile))[native_id]["message_count"] > before

    with pytest.raises(ApiError) as unknown:
        await profile.sessions.create(resume_native_session_id="20200101_000000_abcdef")
    assert unknown.value.status == 404
    with pytest.raises(ApiError) as ours:
        await profile.sessions.create(resume_native_session_id=session.id)
    assert ours.value.status == 400
    assert "a session id of the control plane" in ours.value.detail


async def test_names_come_from_the_pinned_catalog(profile):
    assert "session.list" in NATIVE_METHODS
    assert "list" in dir(profile.native.session)
    with pytest.raises(AttributeError, match="not in the pinned native catalog"):
        profile.native.sesion
    method = profile.native.config.set
    assert method.admin is True
    assert "Administrative" in method.__doc__
    # Hermes 0.19's gateway lists the root's sessions whatever the profile: instance-wide.
    listing = profile.native.session.list
    assert listing.scope == "instance"
    assert "instance-wide, even when called through a profile" in listing.__doc__
    with pytest.raises(ValueError, match="not a method of the pinned"):
        await profile.native.call("no.such_method")


async def test_a_method_the_runtime_lacks_is_unsupported(hermes, profile):
    instance = profile.instance
    capabilities = await instance.capabilities()
    implemented = set(capabilities["native_methods"])
    lacking = sorted(set(NATIVE_METHODS) - implemented)
    assert lacking, "our runtime implements every catalog method: pick another check"
    namespace, _, name = lacking[0].partition(".")
    with pytest.raises(UnsupportedError) as failed:
        await getattr(getattr(instance.native, namespace), name)()
    assert failed.value.operation == lacking[0]


def test_every_catalog_method_is_reached_by_its_name(profile):
    for name in NATIVE_METHODS:
        target = profile.native
        for part in name.split("."):
            target = getattr(target, part)
        assert target.name == name
    # A method that is also a namespace is both.
    assert profile.native.pet.info.name == "pet.info"
    assert profile.native.pet.info.meta.name == "pet.info.meta"


async def test_a_native_call_after_close_is_a_closed_error(tmp_path):
    from edith_hermes import ClosedError, Hermes

    async with Hermes.local(data_dir=tmp_path / "edith") as hermes:
        instance = await hermes.instances.create("closing")
        profile = await instance.profiles.create("assistant")
    with pytest.raises(ClosedError):
        await profile.native.session.list()


async def test_a_runtime_refusal_is_a_native_error_with_its_code(profile):
    from edith_hermes import NativeError

    with pytest.raises(NativeError) as refused:
        await profile.native.prompt.submit(session_id="nope", text="hi")
    assert refused.value.method == "prompt.submit"
    assert isinstance(refused.value.code, int) and refused.value.code > 0
