"""Forget (the Prefect flow ``retention``, deployed nightly as
``retention/retention-nightly``): what the project's retention policy (``memory.retention``)
expires goes, collection by collection, with an audit row each; idle, and done, while no policy
exists."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import Field

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.bootstrap import AppContext, load_context, require_store
from mempipe.domain.retention import as_of_problem, expiry_of
from mempipe.errors import ConfigError
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.flows.recorded_run import concluded, recorded_run
from mempipe.interrupts import handle_stop_signals
from mempipe.schemas.retention import FORGET_BATCH, ForgetSummary
from mempipe.services.forget import plan_forget
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.forget import forget_records, redact_forgotten_files


class Forget(Job[ForgetSummary]):
    """The request of ``mempipe forget``. ``as_of``: the instant the policy is applied at (now
    unless given; never later than now)."""

    as_of: datetime | None = None
    batch_size: int = Field(default=FORGET_BATCH, ge=1)

    def check(self, context: AppContext) -> None:
        require_store(context.store_url)
        if self.as_of is not None and (problem := as_of_problem(_at(self.as_of), _now())):
            raise ConfigError(problem)

    def plan(self, context: AppContext) -> ForgetSummary:  # type: ignore[override]
        policy = context.config.memory.retention
        as_of = _at(self.as_of)
        if policy is None or not policy.forgets:
            return ForgetSummary(as_of=as_of, plan=True)
        with unit_of_work(context.store_url, read_only=True, existing=True) as uow:
            return plan_forget(uow, expiry_of(policy, as_of))

    def run(self, context: AppContext) -> ForgetSummary:
        return retention_flow(
            as_of=self.as_of, batch_size=self.batch_size, **context.flow_options()
        )


@job_flow("retention")
def retention_flow(
    as_of: datetime | None = None,
    batch_size: int = Field(default=FORGET_BATCH, ge=1),
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> ForgetSummary:
    """Each collection the policy has a rule for (and every memory type, with
    ``keep_versions``): its expired records forgotten in batches, then the audit files'
    text of the forgotten memories redacted. A rerun after a kill forgets what is left."""
    handle_stop_signals()
    context = load_context(store, config, store_secret)
    policy = context.config.memory.retention
    when = _at(as_of)
    if policy is None or not policy.forgets:
        return ForgetSummary(as_of=when)
    expiry = expiry_of(policy, when)
    with recorded_run(context, "retention", {"as_of": when.isoformat()}, lock="retention") as run:
        counts = [
            count
            for collection in policy.ruled
            for count in forget_records(
                context.store_url, expiry, collection, run.run_id, batch_size
            )
        ]
        summary = ForgetSummary(
            as_of=when,
            policy=policy,
            counts=counts,
            forgotten=sum(c.records for c in counts),
            files_redacted=redact_forgotten_files(context.store_url),
            run_id=run.run_id,
        )
        run.end(summary.by_collection)
    publish_table(  # per collection and rule: no user's id leaves the store
        "forget",
        [{"collection": c, "rule": r, "records": n} for (c, r), n in summary.by_rule.items()],
        f"forgot {summary.forgotten} record(s) as of {when.isoformat()}",
    )
    return concluded(summary, "retention", None)


def _now() -> datetime:
    return datetime.now(UTC)


def _at(as_of: datetime | None) -> datetime:
    if as_of is None:
        return _now()
    return as_of if as_of.tzinfo is not None else as_of.replace(tzinfo=UTC)
