"""An unreachable hub fails in one bounded try (LLMATH_HUB_TIMEOUT / LLMATH_HUB_RETRIES), not after
huggingface_hub's 5 retries with 23 s of backoff; loopback stand-ins for the hub."""

from __future__ import annotations

import socket
import threading

import pytest
from test_checkpoints import _reload_hf, fake_hub  # noqa: F401 - fixture

from llmath.errors import ConfigError, HubError
from llmath.model import checkpoint


class _Listener:
    """A loopback port that accepts connections and counts them; ``answer=False`` then closes each at once
    (a broken hub), ``answer=None`` holds it open without a byte (a silent one)."""

    def __init__(self, close: bool):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted, self.held, self.close = 0, [], close
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            c.close() if self.close else self.held.append(c)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"


@pytest.fixture
def hub_at(tmp_path, monkeypatch):
    from huggingface_hub.utils import _http

    def no_backoff(s):
        raise AssertionError(f"huggingface_hub backed off {s} s: the probe should have failed first")

    monkeypatch.setattr(_http.time, "sleep", no_backoff)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def point(url: str):
        monkeypatch.setenv("HF_ENDPOINT", url)
        _reload_hf(monkeypatch)
        checkpoint.load.cache_clear()

    yield point
    checkpoint.load.cache_clear()


def test_a_broken_hub_is_one_try_then_retries_as_configured(hub_at, monkeypatch):
    import huggingface_hub as hf

    tries = []
    real = hf.get_hf_file_metadata
    monkeypatch.setattr(hf, "get_hf_file_metadata", lambda *a, **k: tries.append(k.get("timeout")) or real(*a, **k))
    srv = _Listener(close=True)
    hub_at(srv.url)
    with pytest.raises(HubError, match=r"cannot reach the hub .*1 try of 10 s"):
        checkpoint.load("acme/broken")
    assert tries == [10.0] and srv.accepted >= 1  # the hub was asked, once, and no backoff slept
    monkeypatch.setenv("LLMATH_HUB_RETRIES", "2")
    with pytest.raises(HubError, match="3 tries"):
        checkpoint.load("acme/broken-again")
    assert len(tries) == 1 + 3


def test_a_silent_hub_times_out_after_the_configured_seconds(hub_at, monkeypatch):
    srv = _Listener(close=False)
    hub_at(srv.url)
    monkeypatch.setenv("LLMATH_HUB_TIMEOUT", "0.3")
    with pytest.raises(HubError, match=r"1 try of 0\.3 s"):
        checkpoint.load("acme/silent")
    assert srv.accepted == 1


def test_bad_settings_are_one_line(hub_at, monkeypatch):
    hub_at(_Listener(close=True).url)
    monkeypatch.setenv("LLMATH_HUB_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="LLMATH_HUB_TIMEOUT='soon'"):
        checkpoint.load("acme/x")


def test_a_reachable_hub_still_downloads(fake_hub):  # noqa: F811
    assert checkpoint.load("acme/tiny-awq").precision.weights == "awq"
    # the probe's metadata request, then the download's
    assert sum(1 for m, p, _ in fake_hub if p.endswith("/resolve/main/config.json")) >= 2
