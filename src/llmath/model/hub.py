"""Hub ids that are not bundled: fetch config.json (and the ModelOpt sidecar) with ``huggingface_hub``.

Only ``config.json`` and, when the repo has one, ``hf_quant_config.json`` are downloaded, into the HF
cache (``HF_HOME`` / ``HF_HUB_CACHE``), with ``huggingface_hub.hf_hub_download``, which honours
``HF_TOKEN``, ``HF_ENDPOINT`` and ``HF_HUB_OFFLINE`` (offline: the cache only). ``huggingface_hub`` is
an optional dependency, imported here only. Every failure is one line saying what to do next.
"""

from __future__ import annotations

import re
from pathlib import Path

from llmath.errors import ConfigError, UnknownNameError
from llmath.model.config_check import file_kind

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
FILES = ("config.json", "hf_quant_config.json")


def looks_like_repo_id(s: str) -> bool:
    """``org/name`` with hub characters only (and not an existing path)."""
    return bool(REPO_ID.match(s)) and ".." not in s and file_kind(s) == "missing"


def fetch(repo_id: str, revision: str | None = None) -> Path:
    """The cache folder holding ``repo_id``'s config.json (and hf_quant_config.json if the repo has one)."""
    try:
        import huggingface_hub as hf
        from huggingface_hub import errors as hf_errors
    except ImportError:
        raise UnknownNameError(
            f"model {repo_id!r} is not bundled and huggingface_hub is not installed: pip install huggingface_hub, "
            "or download its config.json and pass the path"
        ) from None
    try:
        cfg = hf.hf_hub_download(repo_id, "config.json", revision=revision)
    except hf_errors.RepositoryNotFoundError:
        raise UnknownNameError(
            f"model {repo_id!r}: no such repo on the hub (or it is gated and HF_TOKEN is not set); "
            "check the id, set HF_TOKEN, or pass a config.json path"
        ) from None
    except (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled):  # before EntryNotFoundError
        raise UnknownNameError(
            f"model {repo_id!r} is not bundled, not in the HF cache, and the hub is unreachable or HF_HUB_OFFLINE "
            "is set; connect (or set HF_ENDPOINT to a mirror) once, or download its config.json and pass the path"
        ) from None
    except hf_errors.EntryNotFoundError:
        raise ConfigError(f"model {repo_id!r}: the repo has no config.json; pass a config.json or .gguf path") from None
    except hf_errors.HfHubHTTPError as e:
        raise UnknownNameError(
            f"model {repo_id!r}: the hub answered {e.__class__.__name__} ({e}); retry later"
        ) from None
    except OSError as e:  # connection refused, DNS, ...
        raise UnknownNameError(
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
            raise UnknownNameError(f"model {repo_id!r}: fetching hf_quant_config.json failed ({e})") from None
