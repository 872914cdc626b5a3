"""The shared-memory step barrier between the parent and its workers.

Memory (a caller-owned writable buffer, e.g. a region of the shared segment):
a 64-byte line for the *done bell* (and the completion-ticket counter), one for the *command bell*, then one line
per worker holding ``cmd_seq``, ``done_seq``, ``command`` and ``status`` (u32
each).  The parent ``post``s a command to some workers (writes it, bumps their
``cmd_seq``, rings the command bell once); each worker ``wait_command``s, does
the work, and ``finish``es (stores its status, sets ``done_seq = cmd_seq``,
rings the done bell); the parent ``wait``s for all of a set of workers, or for
``want`` of them (async batches).  A bell makes the wake-up syscall only when
somebody sleeps on it.  All waits release the GIL
and return after at most ``timeout`` seconds so Python can check liveness and
deadlines; the waiting itself (spin, then futex sleep) is in ``ipc_sync.c``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

cimport numpy as cnp

import numpy as np

cnp.import_array()

cdef extern from "ipc_sync.h" nogil:
    ctypedef struct fv_spinner:
        int64_t spin_ns
        int64_t max_spin_ns
        int32_t skip
        int32_t backoff
    void fv_spinner_init(fv_spinner *s, int64_t max_spin_ns)
    int64_t fv_now_ns()
    void fv_store(uint32_t *word, uint32_t value)
    uint32_t fv_load(const uint32_t *word)
    uint32_t fv_fetch_add(uint32_t *word, uint32_t delta)
    void fv_ring(uint32_t *bell)
    void fv_stamp_bell(uint32_t *bell)
    int fv_wait_change(const uint32_t *word, uint32_t old, uint32_t *bell,
                       int64_t deadline_ns, fv_spinner *s)
    int fv_wait_count(const uint32_t *words, int n, int stride_words, const uint32_t *expected,
                      const uint8_t *active, int want, uint32_t *bell, int64_t deadline_ns,
                      fv_spinner *s)
    int fv_set_parent_death_signal(int sig)

cdef enum:
    LINE = 64            # bytes per cache line: two bells, then one line per worker
    BELLS = 2
    WORDS_PER_LINE = 16
    CMD_SEQ = 0          # word indices within a worker's line
    DONE_SEQ = 1
    COMMAND = 2
    STATUS = 3
    TICKET = 4           # order of completion, from the counter in the done bell's line
    TICKET_COUNTER = 2   # word index within the done bell's line
    # (words 0-1 of a bell's line: ring count, sleepers; 4-5 of the done bell's:
    # when the last worker to finish was done)


def barrier_nbytes(int n_workers):
    """Bytes of memory a barrier for ``n_workers`` needs."""
    return LINE * (BELLS + n_workers)


def set_parent_death_signal(int sig):
    """Have the kernel send ``sig`` to this process when its parent dies (Linux only).

    Returns True where supported.
    """
    return fv_set_parent_death_signal(sig) == 0


cdef inline int64_t _deadline(double timeout) noexcept:
    if timeout < 0:
        timeout = 0
    if timeout > 1e6:
        timeout = 1e6
    return fv_now_ns() + <int64_t>(timeout * 1e9)


cdef class Barrier:
    """One process's handle on a barrier living in ``memory``."""

    cdef unsigned char[::1] memory
    cdef uint32_t* done_bell
    cdef uint32_t* command_bell
    cdef uint32_t* lines
    cdef readonly int n_workers
    cdef fv_spinner spinner
    cdef uint32_t[::1] expected
    cdef uint8_t[::1] active
    cdef uint32_t last_seen

    def __init__(self, memory, int n_workers, double max_spin_us=300.0):
        cdef unsigned char[::1] view = memory
        if n_workers < 1:
            raise ValueError(f"expected at least one worker, got {n_workers}")
        if view.shape[0] < barrier_nbytes(n_workers):
            raise ValueError(f"expected at least {barrier_nbytes(n_workers)} bytes of memory, "
                             f"got {view.shape[0]}")
        if (<size_t>&view[0]) % LINE != 0:
            raise ValueError("expected memory aligned to 64 bytes")
        self.memory = view
        self.done_bell = <uint32_t*>&view[0]
        self.command_bell = <uint32_t*>&view[LINE]
        self.lines = <uint32_t*>&view[BELLS * LINE]
        self.n_workers = n_workers
        fv_spinner_init(&self.spinner, <int64_t>(max_spin_us * 1000))
        self.expected = np.zeros(n_workers, dtype=np.uint32)
        self.active = np.zeros(n_workers, dtype=np.uint8)
        self.last_seen = 0

    cdef inline uint32_t* word(self, int worker, int index) except NULL:
        if worker < 0 or worker >= self.n_workers:
            raise IndexError(f"worker {worker} out of range [0, {self.n_workers})")
        return self.lines + worker * WORDS_PER_LINE + index

    @property
    def spin_state(self):
        """This handle's waits: ``(spin_us, skip, backoff)``, the current spin budget, the
        waits left that sleep at once, and the next such run after a lost yield (a yield
        that let another process run; see ``ipc_sync.h``).  For tests and diagnosis.
        """
        return (self.spinner.spin_ns / 1000.0, self.spinner.skip, self.spinner.backoff)

    # -- parent side ----------------------------------------------------------------

    def post(self, workers, uint32_t command):
        """Give each of ``workers`` (an int or an iterable of ints) ``command``; wake them."""
        cdef uint32_t* seq
        cdef list targets = [workers] if isinstance(workers, (int, np.integer)) else list(workers)
        for w in targets:  # check every index before posting to any
            self.word(w, CMD_SEQ)
        for w in targets:
            seq = self.word(w, CMD_SEQ)
            self.word(w, COMMAND)[0] = command
            fv_store(seq, fv_load(seq) + 1)
        fv_ring(self.command_bell)

    def is_done(self, int worker):
        """Whether ``worker`` has finished its last posted command."""
        return fv_load(self.word(worker, DONE_SEQ)) == fv_load(self.word(worker, CMD_SEQ))

    def done_in_order(self, workers):
        """The workers among ``workers`` that are done, earliest finished first."""
        done = [w for w in workers if self.is_done(w)]
        if len(done) < 2:
            return done
        first = self.word(done[0], TICKET)[0]
        return sorted(done, key=lambda w: <int>(<uint32_t>(self.word(w, TICKET)[0] - first)))

    def ticket(self, int worker):
        """``worker``'s place in the order of completion (of its last finished command)."""
        return fv_load(self.word(worker, TICKET))

    def take_ticket(self):
        """A place in the order of completion, as if a command finished now.

        For a block the parent runs itself: it takes its turn among the workers'
        finished blocks from when it was posted (see ``ticket``).
        """
        return fv_fetch_add(self.done_bell + TICKET_COUNTER, 1)

    def status(self, int worker):
        """The status ``worker`` finished its last command with."""
        return fv_load(self.word(worker, STATUS))

    def settle(self, int worker):
        """Mark ``worker``'s last command done (before a replacement worker starts)."""
        fv_store(self.word(worker, DONE_SEQ), fv_load(self.word(worker, CMD_SEQ)))
        fv_store(self.word(worker, STATUS), 0)

    def wait(self, workers, int want=-1, double timeout=0.02):
        """Wait until ``want`` (default: all) of ``workers`` are done, at most ``timeout`` s.

        Returns how many of them are done.
        """
        cdef int w, n = 0, ready, count = 0
        cdef int64_t deadline = _deadline(timeout)
        self.active[:] = 0
        for w in workers:
            self.word(w, CMD_SEQ)
            self.active[w] = 1
            self.expected[w] = fv_load(self.word(w, CMD_SEQ))
            count += 1
        if want < 0 or want > count:
            want = count
        with nogil:
            ready = fv_wait_count(self.lines + DONE_SEQ, self.n_workers, WORDS_PER_LINE,
                                  &self.expected[0], &self.active[0], want, self.done_bell,
                                  deadline, &self.spinner)
        return ready

    # -- worker side ----------------------------------------------------------------

    def wait_command(self, int worker, double timeout=0.1):
        """Wait for a new command for ``worker``; return it, or None after ``timeout`` s."""
        cdef uint32_t* seq = self.word(worker, CMD_SEQ)
        cdef int64_t deadline = _deadline(timeout)
        cdef uint32_t old = self.last_seen
        cdef int result
        with nogil:
            result = fv_wait_change(seq, old, self.command_bell, deadline, &self.spinner)
        if result != 0:
            return None
        self.last_seen = fv_load(seq)
        return self.word(worker, COMMAND)[0]

    def start_worker(self, int worker):
        """Begin serving ``worker``: the next command is the first one not yet done."""
        self.last_seen = fv_load(self.word(worker, DONE_SEQ))

    def finish(self, int worker, uint32_t status=0):
        """Report the current command of ``worker`` done with ``status``; ring the bell."""
        fv_stamp_bell(self.done_bell)  # when it was done, for the parent's lost yields
        fv_store(self.word(worker, TICKET), fv_fetch_add(self.done_bell + TICKET_COUNTER, 1))
        fv_store(self.word(worker, STATUS), status)
        fv_store(self.word(worker, DONE_SEQ), self.last_seen)
        fv_ring(self.done_bell)
