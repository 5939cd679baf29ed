"""The redactor: one machine's home paths, user and host names, and secrets, taken out of
text, binary data and the environment; and the summary of what it took out."""

from __future__ import annotations

import functools
import getpass
import os
import platform
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xla_bugkit import filememo
from xla_bugkit.redact import binary
from xla_bugkit.redact.command import command_secrets
from xla_bugkit.redact.environ import env_secrets
from xla_bugkit.redact.patterns import (
    HOME_PATH,
    HOST_NAME,
    SECRET,
    USER_NAME,
    is_reportable_env_name,
)
from xla_bugkit.redact.rules import Rule, apply_rules, build_rules, clean_values


@dataclass(frozen=True, init=False)
class Redactor:
    """Replaces this machine's home paths, user and host names, and secrets in text.

    Build one with :meth:`for_this_machine`; tests pass explicit values.
    """

    home: tuple[str, ...]
    user: tuple[str, ...]
    host: tuple[str, ...]
    secrets: tuple[str, ...] = field(repr=False)  # known secret values, replaced everywhere
    # xla-bugkit's own folders (the run's work dir): redacted like a home path, but not
    # counted as one, since the user's privacy is not what they reveal.
    own: tuple[str, ...]
    _rules: tuple[Rule, ...] = field(repr=False, compare=False)

    def __init__(
        self,
        *,
        home: str | Iterable[str] = (),
        user: str | Iterable[str] = (),
        host: str | Iterable[str] = (),
        secrets: Iterable[str] = (),
        own: Iterable[str] = (),
    ) -> None:
        homes, users, hosts, known = clean_values(home=home, user=user, host=host, secrets=secrets)
        object.__setattr__(self, "own", tuple(sorted(set(own), key=lambda f: (-len(f), f))))
        object.__setattr__(self, "home", homes)
        object.__setattr__(self, "user", users)
        object.__setattr__(self, "host", hosts)
        object.__setattr__(self, "secrets", known)
        object.__setattr__(self, "_rules", build_rules(homes, users, hosts, known))

    @classmethod
    def for_this_machine(
        cls,
        command: Sequence[str] = (),
        private: Iterable[Path] = (),
        environ: Mapping[str, str] | None = None,
    ) -> Redactor:
        """A redactor for the current user's home, user names and host names, for the secret
        values on ``command`` (the values of "--password", "--token", ...) and for those of
        the secret-looking variables of ``environ`` (default: this process's environment,
        which the program ran in): a program may print its API key anywhere.

        ``private`` folders (the run's work dir) are written as ``~`` too where they are not
        under a home already: XLA writes the dump folder into what it dumps.
        """
        homes: list[str] = []
        for candidate in (lambda: str(Path.home()), lambda: str(Path.home().resolve())):
            homes.extend(_quietly(candidate))
        homes.extend(os.environ.get(n, "") for n in ("HOME", "USERPROFILE"))
        own: list[str] = []
        for folder in private:
            for form in {str(folder.absolute()), str(folder.resolve())}:
                own.append(form)
                if not any(h and (form + "/").startswith(h.rstrip("/") + "/") for h in homes):
                    homes.append(form)
        users = [*_quietly(getpass.getuser)]
        users.extend(os.environ.get(n, "") for n in ("USER", "LOGNAME", "USERNAME"))
        hosts = _host_names()
        environ = os.environ if environ is None else environ
        secrets = (*command_secrets(command), *env_secrets(environ))
        return cls(home=homes, user=users, host=hosts, secrets=secrets, own=own)

    def text(self, s: str) -> str:
        """``s`` with home paths, user and host names, and secrets replaced."""
        return self.text_with_report(s)[0]

    def text_with_report(self, s: str) -> tuple[str, Counter[str]]:
        """Redacted ``s`` and how many of each kind (HOME_PATH, USER_NAME, ...) were replaced."""
        counts: Counter[str] = Counter()
        ours = _occurrences(s, self.own)
        s = apply_rules(self._rules, s, lambda kind, hit: counts.update((kind,)))
        counts[HOME_PATH] -= min(ours, counts[HOME_PATH])
        return s, +counts  # the unary plus drops what is left at zero

    def text_bytes(self, b: bytes) -> bytes:
        """Redact a UTF-8 text file handled as bytes; never use this on binary protos."""
        return self.text(b.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def find_in_bytes(self, b: bytes) -> list[str]:
        """The sensitive strings found in binary ``b``, sorted; secrets shown masked.

        Meant for a local warning ("model.hlo.pb contains /home/alice"), not for the bundle.
        """
        return binary.find_in_bytes(b, self.binary_rules())

    def binary_rules(self) -> tuple[Rule, ...]:
        """The rules made to scan bytes (built once per redactor's values)."""
        return binary.binary_rules(self.home, self.user, self.host, self.secrets)

    def copy_binary(self, src: Path, dst: Path, *, chunk: int = 8 << 20) -> binary.BinaryCopy:
        """Copy a binary dump file (an HLO proto, a snapshot, compile options), redacting it.

        In a proto of a known kind the strings that can hold a path or a name (op metadata,
        stack frames, debug options) are redacted as text is, and their lengths written anew;
        a snapshot's arguments stream through untouched. What remains anywhere else is
        reported by kind in the result's ``left``, to be named in the bundle's notes.
        """
        ahead = _AHEAD.get(src)
        if ahead is not None and ahead[0] == self and _linked(ahead[1], dst, ahead[2]):
            return ahead[3]
        return binary.copy_proto(
            src, dst, self.text_with_report, self._rules, self.binary_rules(), chunk=chunk
        )

    def copy_ahead(self, src: Path, folder: Path) -> Path:
        """``copy_binary`` of ``src`` into ``folder``, done before it is needed: a later
        ``copy_binary`` of the same unchanged ``src`` by an equal redactor links this copy
        instead (``filememo``). Returns the copy."""
        folder.mkdir(parents=True, exist_ok=True)
        copy = folder / f"{len(os.listdir(folder))}.{src.name}"
        result = self.copy_binary(src, copy)
        if (key := filememo.key_of(copy)) is not None:
            _AHEAD.put(src, (self, copy, key, result))
        return copy

    def env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The allowlisted, non-secret variables of ``environ`` with redacted values, sorted."""
        return {
            name: self.text(value)
            for name, value in sorted(environ.items())
            if is_reportable_env_name(name)
        }


def summarize(counts: Counter[str]) -> str:
    """Say what was redacted: ``"3 home paths, 1 host name, 1 secret"``; ``""`` for nothing."""
    order = (HOME_PATH, USER_NAME, HOST_NAME, SECRET)
    kinds = [*order, *sorted(k for k in counts if k not in order)]
    return ", ".join(f"{counts[k]} {k}{'' if counts[k] == 1 else 's'}" for k in kinds if counts[k])


def left_note(name: str, kinds: Sequence[str]) -> str:
    """Say what a binary file still holds where redaction could not rewrite it: ``"not
    redacted: a user name, a host name in modules/f/x.hlo.pb (binary data)"``."""
    return f"not redacted: {', '.join(f'a {k}' for k in kinds)} in {name} (binary data)"


@functools.lru_cache(maxsize=1)
def _host_names() -> tuple[str, ...]:
    """This machine's host names, looked up once: ``getfqdn`` may wait on a name server."""
    hosts = [*_quietly(socket.gethostname), *_quietly(platform.node)]
    hosts.extend(_quietly(socket.getfqdn))
    # Short and fully qualified forms both leak; "box.corp.example" also as "box".
    hosts.extend(h.split(".", 1)[0] for h in list(hosts))
    return tuple(hosts)


def _quietly(get: Callable[[], str]) -> list[str]:
    # Each source can fail in containers (no passwd entry, no DNS); missing ones are skipped.
    try:
        return [get()]
    except (OSError, KeyError, RuntimeError):
        return []


def _occurrences(s: str, folders: Sequence[str]) -> int:
    """How many times ``s`` names one of ``folders`` (longest first; none counted twice)."""
    count = 0
    for folder in folders:
        found = s.count(folder)
        if found:
            count += found
            s = s.replace(folder, "")
    return count


# Redacted copies made ahead of need (``copy_ahead``), by source file: the redactor, the
# copy and its identity then, and what copying did.
_AHEAD: filememo.Memo[tuple[Redactor, Path, filememo.FileKey, binary.BinaryCopy]] = filememo.Memo()


def _linked(copy: Path, dst: Path, key: filememo.FileKey) -> bool:
    """Link ``dst`` to ``copy`` where ``copy`` is still as it was made."""
    if filememo.key_of(copy) != key:
        return False
    try:
        os.link(copy, dst)
    except OSError:  # another file system, or one without links: copied the usual way
        return False
    return True
