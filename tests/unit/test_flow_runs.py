"""The flows a command calls run without Prefect's flow-run heartbeat, unless the user set it."""

from __future__ import annotations

from prefect.settings import (
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    get_current_settings,
    temporary_settings,
)

from mempipe.cli.flow_runs import direct_runs


def test_a_commands_runs_have_no_prefect_heartbeat_by_default() -> None:
    assert get_current_settings().flows.heartbeat_frequency == 180, "Prefect's default"
    with direct_runs():
        assert get_current_settings().flows.heartbeat_frequency is None
    assert get_current_settings().flows.heartbeat_frequency == 180


def test_a_heartbeat_the_user_set_is_kept() -> None:
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}), direct_runs():
        assert get_current_settings().flows.heartbeat_frequency == 60
