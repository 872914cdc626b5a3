/* The step barrier: sequence words and bells in shared memory, C11 atomics + futex.
 *
 * A sequence word is a 32-bit counter one side stores (release) and the other
 * waits on (acquire).  Waiters do not sleep on the words themselves but on a
 * *bell*: a ring counter and a count of sleepers (u32s), and at word 4 a time
 * stamped by fv_stamp_bell (an i64; a bell takes 64-byte-aligned memory and
 * words 0, 1, 4 and 5 of it).  Whoever changes words rings the bell once
 * afterwards; the futex wake syscall is made only when somebody sleeps.  Waits spin briefly (adaptive, yielding the core;
 * the parent not at all for a while after a yield let another process run),
 * then sleep, and return at a deadline so callers can come back to Python in
 * short slices.  No Python.h here.
 */
#ifndef FV_IPC_SYNC_H
#define FV_IPC_SYNC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { FV_OK = 0, FV_TIMEOUT = 1 };

/* Per-waiter spin budget, adapted from how waits have recently ended.  In the
 * parent's waits for its workers, a yield that came back long after the workers
 * it waited for were done (another process held the core meanwhile) turns spinning off for
 * the next `backoff` waits, doubling while it keeps happening. */
typedef struct {
    int64_t spin_ns;      /* current budget */
    int64_t max_spin_ns;  /* 0 disables spinning */
    int32_t skip;         /* waits left that sleep at once (the core is shared) */
    int32_t backoff;      /* the next skip; 0 until a yield is lost */
} fv_spinner;

void fv_spinner_init(fv_spinner *s, int64_t max_spin_ns);

/* Monotonic clock in nanoseconds. */
int64_t fv_now_ns(void);

/* Atomic store (release) and load (acquire) of a word. */
void fv_store(uint32_t *word, uint32_t value);
uint32_t fv_load(const uint32_t *word);

/* Atomically add `delta` to `word`; returns the previous value. */
uint32_t fv_fetch_add(uint32_t *word, uint32_t delta);

/* Ring `bell` (bell[0] counts rings, bell[1] counts sleepers): wake the sleepers. */
void fv_ring(uint32_t *bell);

/* Stamp the time in `bell`'s words 4-5, before storing the words its next ring
 * announces (a waiter that sees them sees the time): how long ago they came. */
void fv_stamp_bell(uint32_t *bell);

/* Wait until *word != old, sleeping on `bell`, or until the monotonic
 * `deadline_ns` passes.  Returns FV_OK or FV_TIMEOUT. */
int fv_wait_change(const uint32_t *word, uint32_t old, uint32_t *bell, int64_t deadline_ns,
                   fv_spinner *s);

/* Wait until at least `want` of the words `words[i * stride_words]` (i in [0, n)
 * with active[i] != 0) equal expected[i], sleeping on `bell`, or until
 * `deadline_ns`.  Returns how many have reached their value. */
int fv_wait_count(const uint32_t *words, int n, int stride_words, const uint32_t *expected,
                  const uint8_t *active, int want, uint32_t *bell, int64_t deadline_ns,
                  fv_spinner *s);

/* Ask the kernel to send `sig` to this process when its parent dies (Linux);
 * returns 0 on success, -1 where unsupported. */
int fv_set_parent_death_signal(int sig);

#ifdef __cplusplus
}
#endif
#endif
