"""The retention policy in force in this process: every command and flow run loads its context,
which keeps the project's policy here (in the environment, where a run's worker processes find
it too), and every read leaves out what it expires (:func:`mempipe.services.search.search`)."""

from __future__ import annotations

import os
from functools import lru_cache

from mempipe.schemas.retention import RetentionPolicy

POLICY_ENV = "MEMPIPE_RETENTION_POLICY"


def keep_policy(policy: RetentionPolicy | None) -> None:
    if policy is None or not policy.forgets:
        os.environ.pop(POLICY_ENV, None)
    else:
        os.environ[POLICY_ENV] = policy.model_dump_json()


def policy_in_force() -> RetentionPolicy | None:
    return _parsed(os.environ.get(POLICY_ENV))


@lru_cache(maxsize=4)
def _parsed(text: str | None) -> RetentionPolicy | None:
    return None if text is None else RetentionPolicy.model_validate_json(text)
