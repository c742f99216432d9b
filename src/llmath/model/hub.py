"""Hub ids that are not bundled: fetch config.json (and the ModelOpt sidecar) with ``huggingface_hub``.

Only ``config.json`` and, when the repo has one, ``hf_quant_config.json`` are downloaded, into the HF
cache (``HF_HOME`` / ``HF_HUB_CACHE``), with ``huggingface_hub.hf_hub_download``, which honours
``HF_TOKEN``, ``HF_ENDPOINT`` and ``HF_HUB_OFFLINE`` (offline: the cache only). ``huggingface_hub`` is
an optional dependency, imported here only. Every failure is one line saying what to do next.

An unreachable hub fails fast: ``hf_hub_download`` retries a network error 5 times with 1 + 2 + 4 + 8 + 8 =
23 s of backoff (and up to 60 s per try) when the file is not cached, so llmath first asks for the file's
metadata itself, ``1 + LLMATH_HUB_RETRIES`` tries (default 1) of ``LLMATH_HUB_TIMEOUT`` seconds each (default
10), without backoff, and only downloads once the hub has answered. A cached file and ``HF_HUB_OFFLINE`` skip
that probe (the cache answers).
"""

from __future__ import annotations

import os
import re
from importlib import import_module
from pathlib import Path

from llmath.errors import ConfigError, HubError, UnknownNameError
from llmath.model.config_check import file_kind

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
FILES = ("config.json", "hf_quant_config.json")
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_RETRIES = 0


def hub_settings() -> tuple[float, int]:
    """(seconds per try, retries) of the first contact with the hub: ``LLMATH_HUB_TIMEOUT`` and
    ``LLMATH_HUB_RETRIES`` (module doc); a bad value is a one-line error."""
    raw_t, raw_r = os.environ.get("LLMATH_HUB_TIMEOUT", ""), os.environ.get("LLMATH_HUB_RETRIES", "")
    try:
        t = float(raw_t) if raw_t else DEFAULT_TIMEOUT_S
        r = int(raw_r, 10) if raw_r else DEFAULT_RETRIES
    except ValueError:
        t, r = -1.0, -1
    if not (0 < t <= 600) or not 0 <= r <= 10:
        raise ConfigError(
            f"LLMATH_HUB_TIMEOUT={raw_t!r} / LLMATH_HUB_RETRIES={raw_r!r}: the timeout must be seconds in (0, 600] "
            "and the retries a whole number from 0 to 10; unset them for 10 s and no retry"
        )
    return t, r


def _probe(hf, repo_id: str, revision: str | None) -> None:
    """Ask the hub for config.json's metadata, bounded (module doc). The hub's answers (no such repo, no such
    file, a server error) raise as huggingface_hub raises them; no answer at all is a one-line error."""
    timeout, retries = hub_settings()
    http = import_module("huggingface_hub.utils._http")
    endpoint = import_module("huggingface_hub.constants").ENDPOINT
    network = (OSError, *getattr(http, "_DEFAULT_RETRY_ON_EXCEPTIONS", ()))
    url = hf.hf_hub_url(repo_id, "config.json", revision=revision)
    last: Exception | None = None
    for _ in range(retries + 1):
        try:
            hf.get_hf_file_metadata(url, timeout=timeout)
            return
        except network as e:  # noqa: PERF203 - a few tries at most
            if hasattr(e, "response") and getattr(e, "response", None) is not None:
                raise  # an HTTP answer (HfHubHTTPError is an OSError too): mapped by fetch
            last = e
    tries = f"{retries + 1} {'try' if retries == 0 else 'tries'} of {timeout:g} s"
    raise HubError(
        f"model {repo_id!r}: cannot reach the hub at {endpoint} ({type(last).__name__}; {tries}; "
        "LLMATH_HUB_TIMEOUT / LLMATH_HUB_RETRIES to wait longer); check the network or HF_ENDPOINT, or download "
        "its config.json and pass the path"
    )


def looks_like_repo_id(s: str) -> bool:
    """``org/name`` with hub characters only (and not an existing path)."""
    return bool(REPO_ID.match(s)) and ".." not in s and file_kind(s) == "missing"


def fetch(repo_id: str, revision: str | None = None) -> Path:
    """The cache folder holding ``repo_id``'s config.json (and hf_quant_config.json if the repo has one)."""
    try:
        import huggingface_hub as hf
        from huggingface_hub import constants as hf_constants
        from huggingface_hub import errors as hf_errors
    except ImportError:
        raise UnknownNameError(
            f"model {repo_id!r} is not bundled and huggingface_hub is not installed: pip install huggingface_hub, "
            "or download its config.json and pass the path"
        ) from None
    try:
        if not hf_constants.HF_HUB_OFFLINE and not isinstance(
            hf.try_to_load_from_cache(repo_id, "config.json", revision=revision), str
        ):
            _probe(hf, repo_id, revision)
        cfg = hf.hf_hub_download(repo_id, "config.json", revision=revision)
    except hf_errors.RepositoryNotFoundError:
        raise UnknownNameError(
            f"model {repo_id!r}: no such repo on the hub (or it is gated and HF_TOKEN is not set); "
            "check the id, set HF_TOKEN, or pass a config.json path"
        ) from None
    except (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled):  # before EntryNotFoundError
        raise HubError(
            f"model {repo_id!r} is not bundled, not in the HF cache, and the hub is unreachable or HF_HUB_OFFLINE "
            "is set; connect (or set HF_ENDPOINT to a mirror) once, or download its config.json and pass the path"
        ) from None
    except hf_errors.EntryNotFoundError:
        raise ConfigError(f"model {repo_id!r}: the repo has no config.json; pass a config.json or .gguf path") from None
    except hf_errors.HfHubHTTPError as e:
        raise HubError(f"model {repo_id!r}: the hub answered {e.__class__.__name__} ({e}); retry later") from None
    except OSError as e:  # connection refused, DNS, ...
        raise HubError(
            f"model {repo_id!r}: cannot reach the hub ({e.__class__.__name__}); check the network or HF_ENDPOINT, "
            "or download its config.json and pass the path"
        ) from None
    _sidecar(hf, hf_errors, repo_id, revision)
    return Path(cfg).parent


def _sidecar(hf, hf_errors, repo_id: str, revision: str | None) -> None:
    """Download hf_quant_config.json beside config.json when the repo has one (absent: fine)."""
    try:
        hf.hf_hub_download(repo_id, "hf_quant_config.json", revision=revision)
    except (hf_errors.EntryNotFoundError, hf_errors.RepositoryNotFoundError):  # Local... is an EntryNotFoundError
        pass
    except hf_errors.HfHubHTTPError as e:
        if getattr(getattr(e, "response", None), "status_code", None) != 404:
            raise HubError(f"model {repo_id!r}: fetching hf_quant_config.json failed ({e})") from None
