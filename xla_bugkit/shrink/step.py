"""The reducer's state, shared by the entry's steps (``reduce``) and those inside called
computations (``reduce_inner``): the best candidate so far, and how to try another."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from xla_bugkit.shrink.hlo_text import Candidate
from xla_bugkit.shrink.oracle import Answer
from xla_bugkit.shrink.session import Session


@dataclass
class Step:
    """The reduction's state: the best candidate so far and how to try another."""

    session: Session
    best: Candidate
    before: int
    checkpoint: Callable[[Candidate], None]
    failed: set[tuple[str, ...]] = field(default_factory=set)  # edits that lost the bug
    rejected: set[bytes] = field(default_factory=set)  # digests of texts probed in vain

    def accept(self, candidate: Candidate) -> bool:
        text = candidate.text()
        digest = hashlib.sha256(text.encode()).digest()
        if text == self.best.text() or digest in self.rejected:
            return False
        if self.session.check(candidate).answer is not Answer.SAME:
            self.rejected.add(digest)
            return False
        self.best = candidate
        self.session.accepted += 1
        self.checkpoint(candidate)
        self.session.progress(self.before, candidate.instruction_count())
        return True
