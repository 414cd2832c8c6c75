"""All wiring in one place: settings, project configuration, the store, identity defaults.

Flows and the CLI call these; nothing is built at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mempipe.adapters.store import Store, open_store
from mempipe.schemas.config import ProjectConfig
from mempipe.schemas.identity import IdentityDefaults
from mempipe.settings import Settings, load_project_config, load_settings

DEFAULT_ORG = "default"
DEFAULT_PROJECT = "default"


@dataclass(frozen=True)
class AppContext:
    settings: Settings
    config: ProjectConfig

    @property
    def store_url(self) -> str:
        return self.settings.store

    def open_store(self, *, migrate: bool = True, read_only: bool = False) -> Store:
        """The store, with this project's declarations recorded (write-once) when a project
        configuration file is present. ``read_only``: an existing mempipe store, unchanged."""
        store = open_store(self.store_url, migrate=migrate, read_only=read_only)
        if migrate and not read_only and self.settings.config.exists():
            memory = self.config.memory
            store.declare(memory.metadata_partition_keys, memory.custom_types)
        return store

    def identity_defaults(
        self,
        org_id: str | None = None,
        project_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> IdentityDefaults:
        """Arguments over ``MEMPIPE_ORG_ID`` / ``MEMPIPE_PROJECT_ID`` over the config file."""
        return IdentityDefaults(
            org_id=org_id or self.settings.org_id or self.config.org_id or DEFAULT_ORG,
            project_id=project_id
            or self.settings.project_id
            or self.config.project_id
            or DEFAULT_PROJECT,
            user_id=user_id,
            agent_id=agent_id,
        )


def load_context(store: str | None = None, config: str | Path | None = None) -> AppContext:
    settings = load_settings(store=store, config=config)
    return AppContext(settings=settings, config=load_project_config(settings.config))
