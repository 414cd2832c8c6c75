"""The flows a command calls run without Prefect's flow-run heartbeat, unless the user set it,
and report to the Prefect API the user configured, where there is one."""

from __future__ import annotations

from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    get_current_settings,
    temporary_settings,
)

from mempipe.cli.flow_runs import reporting_to_prefect

CONFIGURED = "http://127.0.0.1:9/api"
"""A configured API: the command starts no server of its own (nothing is called here)."""


def test_a_commands_runs_have_no_prefect_heartbeat_by_default() -> None:
    assert get_current_settings().flows.heartbeat_frequency == 180, "Prefect's default"
    with temporary_settings(updates={PREFECT_API_URL: CONFIGURED}), reporting_to_prefect():
        assert get_current_settings().flows.heartbeat_frequency is None
        assert get_current_settings().api.url == CONFIGURED
    assert get_current_settings().flows.heartbeat_frequency == 180


def test_a_heartbeat_the_user_set_is_kept() -> None:
    with (
        temporary_settings(
            updates={PREFECT_API_URL: CONFIGURED, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}
        ),
        reporting_to_prefect(),
    ):
        assert get_current_settings().flows.heartbeat_frequency == 60
