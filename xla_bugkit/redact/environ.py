"""Secret values in the environment the program ran in: a program that prints its API key
(a W&B or Hugging Face login, a database URL) prints it anywhere, so the redactor learns the
values of the variables whose names look secret and takes them out of every text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from xla_bugkit.redact.patterns import COMMON_NAMES, PLAIN_VALUES

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|DSN",
    re.IGNORECASE,
)
# Names with a secret word whose values are no secret, but paths and settings that text
# is full of ("PWD" is the folder every dump path starts with).
_NOT_SECRET = frozenset(
    {
        "PWD",
        "OLDPWD",
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "DBUS_SESSION_BUS_ADDRESS",
        "SESSION_MANAGER",
        "DESKTOP_SESSION",
        "GDMSESSION",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "PASSWORD_STORE_DIR",
        "GNOME_KEYRING_CONTROL",
        "TOKENIZERS_PARALLELISM",
    }
)
_NOT_SECRET_PREFIXES = ("XDG_SESSION_",)
# Shorter values are too likely to be ordinary words or numbers in the text around them.
MIN_LENGTH = 6


def env_secrets(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values of ``environ``'s secret-looking variables (``WANDB_API_KEY``,
    ``HF_TOKEN``, ``DB_PASSWORD``, ...) worth hunting for in every text, sorted."""
    values = {value.strip() for name, value in environ.items() if _is_secret_name(name)}
    return tuple(sorted(v for v in values if _is_worth_hunting(v)))


def _is_secret_name(name: str) -> bool:
    if name in _NOT_SECRET or name.startswith(_NOT_SECRET_PREFIXES):
        return False
    return _SECRET_NAME.search(name) is not None


def _is_worth_hunting(value: str) -> bool:
    if len(value) < MIN_LENGTH or value.lower() in PLAIN_VALUES | COMMON_NAMES:
        return False
    # A path that exists is a setting (a socket, a config file), and a secret that happens
    # to start with "/" (base64 does) names no file.
    return not (value.startswith(("/", "~")) and _exists(value))


def _exists(path: str) -> bool:
    try:
        return Path(path).expanduser().exists()
    except (OSError, RuntimeError, ValueError):
        return False
