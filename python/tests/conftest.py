"""Fixtures: a local context per test (an embedded control plane, runtime and tool host inside
the test process, on loopback, with a data dir of its own)."""

from __future__ import annotations

import pytest

from edith_hermes import Hermes


@pytest.fixture
async def hermes(tmp_path):
    async with Hermes.local(data_dir=tmp_path / "edith") as hermes:
        yield hermes


@pytest.fixture
async def profile(hermes):
    instance = await hermes.instances.create("tests")
    return await instance.profiles.create("assistant")


def admin_key(data_dir) -> str:
    """The first admin key the embedded control plane wrote to its data dir."""
    return (data_dir / "admin.key").read_text().strip()
