"""What counts as private: the placeholders, the secret words and token shapes, the names too
common to hunt for, and which environment variables a bug report may show."""

from __future__ import annotations

import re

HOME = "~"
USER = "<USER>"
HOST = "<HOST>"
REDACTED = "<REDACTED>"

# Counter keys of text_with_report(); summarize() turns them into "2 home paths, 1 secret".
HOME_PATH = "home path"
USER_NAME = "user name"
HOST_NAME = "host name"
SECRET = "secret"

# Environment variables worth showing in a bug report; everything else is dropped.
_ENV_PREFIXES = (
    *("JAX_", "XLA_", "NVIDIA_", "CUDA_", "TPU_", "LIBTPU_", "PJRT_", "NCCL_"),
    # TensorFlow's, not all of TF_*: Terraform uses TF_VAR_* and TF_CLI_* for its own settings.
    *("TF_CPP_", "TF_XLA_", "TF_GPU_", "TF_FORCE_", "TF_ENABLE_"),
)
_ENV_NAMES = frozenset(
    {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "LD_LIBRARY_PATH",  # CUDA library mix-ups are a common cause of GPU failures
        "ENABLE_PJRT_COMPATIBILITY",
    }
)
SECRET_WORDS = "TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE"
_SECRET_NAME = re.compile(SECRET_WORDS, re.IGNORECASE)

# Names that are also ordinary words (or identify nobody): replacing them everywhere would
# turn "import jax" into "import <USER>", so they are only replaced in telling contexts.
_COMMON_WORDS = (
    "root admin administrator user users jax xla test tests home guest dev data main default "
    "worker python docker build jenkins runner app nobody local node server host gpu cpu tpu "
    "linux ubuntu debian centos colab kaggle ec2-user opt tmp work"
)
COMMON_NAMES = frozenset(_COMMON_WORDS.split())
# Host names that identify nobody; not worth redacting at all.
TRIVIAL_HOSTS = frozenset({"", "localhost", "localhost.localdomain", "(none)", "ip6-localhost"})
# Homes that are shared system directories: rewriting them to ~ would mislead, not protect.
SYSTEM_DIRS = frozenset({"/", "/tmp", "/var", "/usr", "/opt", "/nonexistent", "/home"})

# Well-known token shapes. Each is specific enough that a false positive is unlikely. With
# each, a text every match contains: most texts lack it, and a substring test is ~20x faster.
TOKEN_PATTERNS = (
    (r"\bgh[pousr]_[A-Za-z0-9]{20,}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (r"\bgithub_pat_[A-Za-z0-9_]{20,}", "github_pat_"),
    (r"\bglpat-[A-Za-z0-9_-]{20,}", "glpat-"),
    (r"\bhf_[A-Za-z0-9]{20,}", "hf_"),
    (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", ("AKIA", "ASIA")),
    (r"\bsk-[A-Za-z0-9_-]{20,}", "sk-"),
    (r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "xox"),
    (r"\bya29\.[A-Za-z0-9_-]{20,}", "ya29."),
    (r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----", "-----BEGIN"),
)
_VALUE = r"""(?:"[^"\n]*"|'[^'\n]*'|[^\s"',;&]+)"""
# NAME=value (shell, env dumps, flags) and "name": "value" (JSON) where NAME looks secret.
# No spaces around "=": HLO text has "%token.1 = token[] after-all()", which is no secret.
ASSIGN = rf"(?i)(\b[\w.-]*(?:{SECRET_WORDS})[\w.-]*=)(?!{REDACTED}){_VALUE}"
JSON = rf"""(?i)("[\w.-]*(?:{SECRET_WORDS})[\w.-]*"\s*:\s*)"[^"\n]*\""""
BEARER = r"(?i)(\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/-]{16,}=*"
# Command-line options whose value is a secret: "--password hunter2", "--hf-token X". The
# option's last word decides, so "--max-tokens 128", "--tokenizer t5" and "--token-file F"
# keep their values.
_OPTION = (
    r"--?(?:[a-z0-9]+[-_.])*"
    r"(?:password|passwd|token|secret|auth|credentials?|(?:api|secret|access|private)[-_]?key)"
)
SECRET_OPTION = re.compile(_OPTION, re.IGNORECASE)
# The same option followed by its value in text: a shell command line, or Python's repr of
# sys.argv ("'--token', 'abc'"). The value is not itself an option.
OPTION_VALUE = (
    rf"""(?i)((?<![\w-]){_OPTION}(?:\s+|=|(?P<q>['"]),\s*(?P=q)))"""
    rf"(?!-|{REDACTED})(?P<value>{_VALUE})"
)
# Values of secret options too plain to hunt for in every text ("--auth off"); they are still
# redacted where they follow their option.
PLAIN_VALUES = frozenset(
    {"true", "false", "yes", "no", "on", "off", "none", "null", "basic", "bearer", "default"}
)
URL_CREDENTIALS = r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+(@)"


def is_reportable_env_name(name: str) -> bool:
    """True for variables a bug report should show (JAX_*, XLA_*, ...) unless they look secret."""
    allowed = name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES
    return allowed and not _SECRET_NAME.search(name)
