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
    (r"\bsk-[A-Za-z0-9_-]{20,}", "sk-"),  # OpenAI, Anthropic (sk-ant-)
    (r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", ("k_live_", "k_test_")),  # Stripe
    (r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "xox"),
    (r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+", "hooks.slack.com"),
    (r"\bya29\.[A-Za-z0-9_-]{20,}", "ya29."),
    (r"\bAIza[A-Za-z0-9_-]{35}(?![\w-])", "AIza"),  # Google API keys
    (r"\bnpm_[A-Za-z0-9]{36}\b", "npm_"),
    (r"\bpypi-AgE[A-Za-z0-9_-]{40,}", "pypi-AgE"),
    (r"\bdapi[0-9a-f]{32}\b", "dapi"),  # Databricks
    # A JSON Web Token: header and payload are base64 JSON objects ('{"' is "eyJ").
    (r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "eyJ"),
    (
        r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----",
        "-----BEGIN",
    ),
)
_VALUE = r"""(?:"[^"\n]*"|'[^'\n]*'|[^\s"',;&]+)"""
# A value that is a number or a truth value, whole: a setting, not a secret. A jaxpr has
# "sort[num_keys=1 is_stable=True]", a config "max_tokens=4096", "sort_keys=True".
_COUNT = r"""(?:\d{1,9}|true|false|none)(?=$|[\s"',;&)\]}])"""
# NAME=value (shell, env dumps, flags, query strings) where NAME looks secret; a name that
# ends in "_pass" or "_pwd" too ("DB_PASS", "MYSQL_PWD"), but not "--xla_disable_hlo_passes".
# No spaces around "=": HLO text has "%token.1 = token[] after-all()", which is no secret.
ASSIGN = (
    rf"(?i)(\b(?:[\w.-]*(?:{SECRET_WORDS})[\w.-]*|[\w.-]*[_.-](?:pass|pwd))=)"
    rf"(?!{REDACTED}|{_COUNT}){_VALUE}"
)
BEARER = r"(?i)(\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/-]{16,}=*"
# An HTTP Authorization header, whatever its scheme: "Authorization: Basic dXNlcjpwdw==".
AUTH_HEADER = (
    r"(?i)(\b(?:proxy-)?authorization[ \t]*[:=][ \t]*"
    r"(?:(?:bearer|basic|token|digest|negotiate|ntlm)[ \t]+)?)"
    rf"(?!{REDACTED})[^\s\"',;]+"
)
# A name whose value is a secret in the structured forms below (JSON, a Python dict, YAML,
# INI, a log line): its last word decides, words split by "-_." or camelCase. "password",
# "db_pass", "api_key", "auth_token", "secretAccessKey", but not a bare "key" or "pass" (a
# JAX PRNG key, an HLO pass), nor "max_tokens", "maxTokens", "tokenizer" or "key_dim".
_SECRET_NAME_LAST = (
    r"(?:[a-z0-9]++[-_.]|(?-i:[A-Za-z0-9][a-z0-9]*+(?=[A-Z])))*"
    r"(?:password|passwd|passphrase|pwd|secret|token|credentials?|auth|authorization|cookie"
    r"|apikey|session[-_]?id|(?:api|secret|access|private|auth|client|signing|encryption"
    r"|master|account|service|app|session)[-_.]?key|(?<=[-_.])pass|(?-i:(?<=[a-z0-9])Pass))"
)
# Values that name no secret: plain words, and Python annotations ("token: str").
_NOT_SECRET = r"(?:true|false|yes|no|on|off|none|null|basic|bearer|str|bytes|int|optional)\b"
# The value of those forms: a quoted string, or one word that is no call or index
# ("token = get_token()", "api_key = os.environ['K']" are code, not secrets) and no
# comparison ("token == x").
_STRUCTURED_VALUE = (
    rf"(?!{REDACTED}|{_NOT_SECRET})"
    r"""(?:"[^"\n]*"|'[^'\n]*'|[^\s"'`,;&(){}\[\]<>=$%!][^\s"'`,;&(){}\[\]<>]*+(?![(\[<]))"""
)
# name: value and name = value where the name looks secret, in the forms of JSON and a Python
# dict's repr ("name": value, 'name': value), YAML and log lines (name: value), INI files such
# as ~/.aws/credentials and Python (name = value). NAME=value without spaces is ASSIGN's. A
# match never crosses a newline.
STRUCTURED = (
    rf"""(?i)((?:(?P<k>['"]){_SECRET_NAME_LAST}(?P=k)[ \t]*:"""
    rf"|(?<![\w.%@$/-]){_SECRET_NAME_LAST}(?:[ \t]*:(?![:/=])|[ \t]+=|=[ \t]+))[ \t]*)"
    + _STRUCTURED_VALUE
)
# A signature in a signed URL's query string (AWS "X-Amz-Signature=", Azure SAS "sig=").
QUERY_SIGNATURE = rf"(?i)([?&][\w.-]*(?:sig|signature)=)(?!{REDACTED})[^&\s#\"'<>]+"
# Command-line options whose value is a secret: "--password hunter2", "--hf-token X",
# "--db-pass X", "--key X". The option's last word decides, so "--max-tokens 128",
# "--tokenizer t5", "--token-file F" and "--num-passes 2" keep their values.
_OPTION = (
    r"--?(?:[a-z0-9]+[-_.])*"
    r"(?:password|passwd|passphrase|pass|pwd|token|secret|auth|credentials?|key"
    r"|(?:api|secret|access|private)[-_]?key)"
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
URL_CREDENTIALS = r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]+(@)"


def is_reportable_env_name(name: str) -> bool:
    """True for variables a bug report should show (JAX_*, XLA_*, ...) unless they look secret."""
    allowed = name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES
    return allowed and not _SECRET_NAME.search(name)
