"""Where the local model computes (``MEMPIPE_LOCAL_DEVICE``): the CPU unless told, a device
torch names, anything else refused with the variable's name before any work."""

from __future__ import annotations

import pytest

from mempipe.errors import ConfigError
from mempipe.settings import load_local_device


@pytest.mark.parametrize(
    ("given", "device"), [(None, "cpu"), ("cuda", "cuda"), ("cuda:1", "cuda:1")]
)
def test_the_device_is_the_cpu_unless_told(monkeypatch, given, device) -> None:
    if given is None:
        monkeypatch.delenv("MEMPIPE_LOCAL_DEVICE", raising=False)
    else:
        monkeypatch.setenv("MEMPIPE_LOCAL_DEVICE", given)
    assert load_local_device() == device


def test_an_unknown_device_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("MEMPIPE_LOCAL_DEVICE", "gpu0")
    with pytest.raises(ConfigError, match="MEMPIPE_LOCAL_DEVICE='gpu0'"):
        load_local_device()
