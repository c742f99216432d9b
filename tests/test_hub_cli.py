"""Hub ids that are not bundled, end to end: ``llmath`` in a fresh subprocess (so huggingface_hub is imported the
way a user's shell imports it, with nothing pre-imported by a fixture) against a loopback stand-in for the hub,
offline mode, a hub that refuses connections and one that never answers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from helpers import StandInHub, registry_config

pytest.importorskip("huggingface_hub")

# Llama-3.2-1B: 1,235,814,400 parameters, transformers' count on the meta device (tests/test_oracle_params.py
# proves the bundled config equal to it; docs/validation.md quotes the same figure for the random-weight run).
LLAMA_32_1B_PARAMS = 1_235_814_400
REPO = "some-org/some-model"


def _llmath(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "LLMATH_HUB"))}
    return subprocess.run(
        [sys.executable, "-m", "llmath", *args], env=base | env, capture_output=True, text=True, timeout=timeout
    )


def _one_line_error(p: subprocess.CompletedProcess, code: int, words: str) -> None:
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and words in p.stderr, p.stderr


@pytest.fixture
def hub(tmp_path):
    files = {(REPO, "config.json"): json.dumps(registry_config("llama-3.2-1b")).encode()}
    with StandInHub(files) as h:
        yield h, {"HF_ENDPOINT": h.url, "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_TOKEN": "hf_test_token"}


def test_params_of_a_hub_id_then_offline_from_the_cache(hub):
    server, env = hub
    p = _llmath(env, "params", REPO, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["total"] == LLAMA_32_1B_PARAMS
    assert any(
        path.endswith("/resolve/main/config.json") and auth == "Bearer hf_test_token" for _, path, auth in server.seen
    )
    # a second process, offline: the HF cache answers, the stand-in is not asked again
    asked = len(server.seen)
    p = _llmath(env | {"HF_HUB_OFFLINE": "1"}, "params", REPO, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["total"] == LLAMA_32_1B_PARAMS and len(server.seen) == asked


def test_unknown_repo_and_offline_uncached_are_one_line(hub):
    _, env = hub
    _one_line_error(_llmath(env, "params", "some-org/nothing-here"), 2, "no such repo")  # an unknown name
    _one_line_error(_llmath(env | {"HF_HUB_OFFLINE": "1"}, "params", REPO), 1, "not in the HF cache")


def _closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return f"http://127.0.0.1:{port}"


def test_bad_endpoint_fails_once_in_one_line(tmp_path):
    env = {"HF_ENDPOINT": _closed_port(), "HF_HUB_CACHE": str(tmp_path / "cache")}
    t = time.monotonic()
    p = _llmath(env, "params", REPO)
    _one_line_error(p, 1, "cannot reach the hub")
    assert time.monotonic() - t < 20  # one try, no backoff (huggingface_hub alone backs off 23 s)


def test_silent_hub_times_out_after_the_stated_seconds(tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (the kernel's backlog) but never answers
    env = {
        "HF_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
        "HF_HUB_CACHE": str(tmp_path / "cache"),
        "LLMATH_HUB_TIMEOUT": "1",
    }
    try:
        t = time.monotonic()
        p = _llmath(env, "params", REPO)
        _one_line_error(p, 1, "cannot reach the hub")
        assert "1 try of 1 s" in p.stderr and time.monotonic() - t < 20
    finally:
        silent.close()
