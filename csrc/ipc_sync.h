/* The step barrier: sequence words in shared memory, C11 atomics + Linux futex.
 *
 * A word is a 32-bit counter that one side publishes (store-release, then wake)
 * and the other side waits on (load-acquire; a short adaptive spin, then sleep
 * in the kernel).  Waits take a deadline and return when it passes, so callers
 * can return to Python in short slices.  No Python.h here.
 */
#ifndef FV_IPC_SYNC_H
#define FV_IPC_SYNC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { FV_OK = 0, FV_TIMEOUT = 1 };

/* Per-waiter spin budget, adapted from how waits have recently ended. */
typedef struct {
    int64_t spin_ns;      /* current budget */
    int64_t max_spin_ns;  /* 0 disables spinning */
} fv_spinner;

void fv_spinner_init(fv_spinner *s, int64_t max_spin_ns);

/* Monotonic clock in nanoseconds. */
int64_t fv_now_ns(void);

/* Store `value` into `word` (release) and wake every waiter on it. */
void fv_publish(uint32_t *word, uint32_t value);

/* Store `value` into `word` (release) without waking anyone. */
void fv_store(uint32_t *word, uint32_t value);

/* Atomic load (acquire). */
uint32_t fv_load(const uint32_t *word);

/* Add one to `bell` (release) and wake every waiter on it.  Workers ring the
 * shared bell after storing their done word, so one sleeping parent hears any. */
void fv_ring(uint32_t *bell);

/* Wait until *word != old, or until the monotonic `deadline_ns` passes.
 * Returns FV_OK or FV_TIMEOUT. */
int fv_wait_change(uint32_t *word, uint32_t old, int64_t deadline_ns, fv_spinner *s);

/* Wait until at least `want` of the words `words[i * stride_words]` (i in [0, n)
 * with active[i] != 0) equal expected[i], or until `deadline_ns`.  Sleeps on
 * `bell` between checks.  Returns how many have reached their value. */
int fv_wait_count(uint32_t *words, int n, int stride_words, const uint32_t *expected,
                  const uint8_t *active, int want, uint32_t *bell, int64_t deadline_ns,
                  fv_spinner *s);

/* Ask the kernel to send `sig` to this process when its parent dies (Linux);
 * returns 0 on success, -1 where unsupported. */
int fv_set_parent_death_signal(int sig);

#ifdef __cplusplus
}
#endif
#endif
