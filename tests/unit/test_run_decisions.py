"""The decisions a flow used to make inline: when a re-embed switches, when a run is done."""

from __future__ import annotations

from mempipe.domain.reembed import decide_switch
from mempipe.domain.run_outcome import extractions_left, run_status, unread_files
from mempipe.schemas.reembed import CollectionReport, GateReport
from mempipe.schemas.replay import ReplaySummary
from mempipe.schemas.run import RunStatus


def report(collection: str, records: int, vectors: int, **more: object) -> CollectionReport:
    return CollectionReport(
        collection=collection, model_id="m", records=records, vectors=vectors, **more
    )


def gate(passed: bool) -> GateReport:
    return GateReport(
        queries=10, old_recall=0.8, new_recall=0.7, ratio=0.875, min_ratio=0.95, passed=passed
    )


def test_a_move_switches_every_collection_only_when_all_are_complete_and_the_gate_passed():
    done = [report("stm", 3, 3), report("semantic", 2, 2)]
    assert decide_switch(done, [], incremental=False, gate=None).switch == ["stm", "semantic"]
    assert decide_switch(done, [], incremental=False, gate=gate(True)).reason is None

    failed_gate = decide_switch(done, [], incremental=False, gate=gate(False))
    assert failed_gate.switch == []
    assert failed_gate.reason == "recall ratio 0.875 is below 0.95"

    half = [report("stm", 3, 3), report("semantic", 2, 1, failed=1, provider_error="HTTP 500")]
    decision = decide_switch(half, [], incremental=False, gate=gate(True))
    assert decision.switch == [], "one incomplete collection keeps every collection where it was"
    assert decision.reason == (
        "semantic: 1 record(s) without a new vector (the provider failed: HTTP 500)"
    )


def test_an_incremental_run_switches_only_complete_collections_built_for_the_first_time():
    reports = [report("stm", 3, 3), report("semantic", 2, 1, failed=1), report("episodic", 1, 1)]
    decision = decide_switch(reports, ["stm", "semantic"], incremental=True, gate=None)
    assert decision.switch == ["stm"]
    assert decision.reason == "semantic: 1 record(s) without a vector"
    assert decide_switch(reports[::2], [], incremental=True, gate=None).reason is None


def test_a_text_the_model_refused_does_not_make_a_collection_incomplete():
    refused = [report("stm", 3, 2, unembeddable=1)]
    assert decide_switch(refused, [], incremental=False, gate=None).switch == ["stm"]


def test_a_run_is_interrupted_by_a_signal_failed_with_work_undone_else_completed():
    assert run_status(None, None) == (RunStatus.COMPLETED, None)
    assert run_status(None, "2 files") == (RunStatus.FAILED, "2 files")
    assert run_status("SIGTERM", None) == (RunStatus.INTERRUPTED, "stopped by SIGTERM")
    assert run_status("SIGINT", "2 files") == (RunStatus.INTERRUPTED, "stopped by SIGINT; 2 files")


def test_what_a_run_left_undone_is_named():
    assert unread_files([]) is None
    assert unread_files(
        [("a.jsonl", "whole file rejected: truncated at byte 3770")], "r.jsonl"
    ) == ("1 file(s) could not be read to the end: a.jsonl: truncated at byte 3770 (see r.jsonl)")
    many = [(f"{n}.json", f"reason {n}") for n in range(5)]
    assert unread_files(many) == (
        "5 file(s) could not be read to the end: 0.json: reason 0; 1.json: reason 1; "
        "2.json: reason 2; and 2 more"
    ), "the first few with why, then a count"
    summary = ReplaySummary(
        run_id="r1", store="s", extractor="offline", embedding_model="m", extractions=5
    )
    assert extractions_left(summary) is None
    summary.failed_retryable, summary.failed_content = 2, 1
    assert extractions_left(summary) == (
        "3 of 5 extraction(s) failed (2 retryably, 1 on content: see "
        "`mempipe report --run-id r1`); `mempipe replay` again retries the 2 retryable one(s)"
    )
    summary.failure = "nothing more is sent to m at e in this run: 5 failures in a row"
    assert extractions_left(summary).endswith(
        "; most with: nothing more is sent to m at e in this run: 5 failures in a row"
    ), "the error most of them failed with, on the same line"


def test_a_preview_with_failures_is_undone_as_a_replay_with_them_is():
    from mempipe.domain.run_outcome import preview_left
    from mempipe.schemas.replay import ReplayPreview

    preview = ReplayPreview.model_construct(extractions=4, failed=0, failures=[])
    assert preview_left(preview) is None
    preview.failed, preview.failures = 4, ["snap_1/semantic: refused"]
    assert preview_left(preview) == (
        "4 of 4 extraction(s) failed in the preview: snap_1/semantic: refused"
    )
