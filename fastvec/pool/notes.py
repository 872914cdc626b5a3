"""Notes for the user on the ``fastvec`` logger, in the trainer, wherever the envs run.

An env's observation cast to its space's dtype is noted once (a WARNING) by the
compiled kernel of the process that steps the env.  In a worker process nobody
would see it there: :class:`NoteCollector` keeps what the worker logs on the
``fastvec`` logger, the worker sends it with its next reply, and the trainer logs
each note once (:func:`relay`; a cast noted by the trainer's own block and by a
worker is the same note).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import NamedTuple

from fastvec._kernels.flatten import first_note

__all__ = ["Note", "NoteCollector", "relay"]

log = logging.getLogger("fastvec")


class Note(NamedTuple):
    """One record of the ``fastvec`` logger; ``key`` says which notes are the same."""

    level: int
    message: str
    key: Hashable


class NoteCollector(logging.Handler):
    """Keeps this process's ``fastvec`` records, for the trainer, instead of printing them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.notes: list[Note] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.notes.append(Note(record.levelno, message, getattr(record, "note_key", message)))

    def take(self) -> list[Note]:
        notes, self.notes = self.notes, []
        return notes

    def install(self) -> NoteCollector:
        """Catch every record of the ``fastvec`` logger of this process (a worker's)."""
        log.addHandler(self)
        log.setLevel(logging.INFO)
        log.propagate = False
        return self


def relay(notes: list[Note]) -> None:
    """Log ``notes`` in this process (the trainer's), each key once."""
    for note in notes:
        if first_note(note.key):
            log.log(note.level, note.message)
