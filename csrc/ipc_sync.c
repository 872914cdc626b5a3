/* The step barrier; see ipc_sync.h. */
#define _GNU_SOURCE
#include "ipc_sync.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FV_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define FV_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define FV_CPU_RELAX() ((void)0)
#endif

/* The longest single sleep; waits re-check their words at least this often. */
#define FV_MAX_SLEEP_NS 5000000LL

/* A yield that returns this long after the words it waited for came (the time
 * fv_stamp_bell wrote) let another process hold this core: the machine has more
 * runnable processes than cores, where a spinner's yields hand out whole time
 * slices and a sleeper is woken by the ring at once.  A yield that ran the
 * process being waited for comes back just after that process was done. */
#define FV_LOST_YIELD_NS 50000LL
/* Waits that sleep at once after the first lost yield; doubled on each lost one
 * after, up to the most, and halved by each spin whose yields were not lost. */
#define FV_FIRST_BACKOFF 64
#define FV_MAX_BACKOFF 4096

#define AS_ATOMIC(p) ((_Atomic uint32_t *)(p))
#define BELL_TIME(bell) ((_Atomic int64_t *)((bell) + 4))

void fv_spinner_init(fv_spinner *s, int64_t max_spin_ns) {
    s->max_spin_ns = max_spin_ns > 0 ? max_spin_ns : 0;
    s->spin_ns = s->max_spin_ns / 4;
    s->skip = 0;
    s->backoff = 0;
}

int64_t fv_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void fv_store(uint32_t *word, uint32_t value) {
    atomic_store_explicit(AS_ATOMIC(word), value, memory_order_release);
}

uint32_t fv_load(const uint32_t *word) {
    return atomic_load_explicit(AS_ATOMIC(word), memory_order_acquire);
}

uint32_t fv_fetch_add(uint32_t *word, uint32_t delta) {
    return atomic_fetch_add(AS_ATOMIC(word), delta);
}

void fv_stamp_bell(uint32_t *bell) {
    /* Relaxed: the release store of the words that follow publishes it. */
    atomic_store_explicit(BELL_TIME(bell), fv_now_ns(), memory_order_relaxed);
}

void fv_ring(uint32_t *bell) {
    /* Both operations are sequentially consistent: a sleeper either sees the new
     * ring count (and does not sleep) or is counted in bell[1] (and is woken). */
    atomic_fetch_add(AS_ATOMIC(bell), 1u);
    if (atomic_load(AS_ATOMIC(bell + 1)) == 0) return;
#ifdef __linux__
    syscall(SYS_futex, bell, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
#endif
}

/* Sleep until the bell rings past `rung`, at most until the deadline. */
static void sleep_on(uint32_t *bell, uint32_t rung, int64_t deadline_ns) {
    int64_t left = deadline_ns - fv_now_ns();
    if (left <= 0) return;
    if (left > FV_MAX_SLEEP_NS) left = FV_MAX_SLEEP_NS;
    atomic_fetch_add(AS_ATOMIC(bell + 1), 1u);
#ifdef __linux__
    struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    syscall(SYS_futex, bell, FUTEX_WAIT, rung, &ts, NULL, 0);
#else
    /* Portable fallback: short sleeps until the deadline. */
    if (atomic_load(AS_ATOMIC(bell)) == rung) {
        struct timespec ts = {0, left < 50000 ? (long)left : 50000L};
        nanosleep(&ts, NULL);
    }
#endif
    atomic_fetch_sub(AS_ATOMIC(bell + 1), 1u);
}

/* After a spin's yields: `lost` if one of them let another process hold the core. */
static void after_yields(fv_spinner *s, int lost) {
    if (lost) {
        int32_t next = s->backoff ? 2 * s->backoff : FV_FIRST_BACKOFF;
        s->backoff = next < FV_MAX_BACKOFF ? next : FV_MAX_BACKOFF;
        s->skip = s->backoff;
    } else if (s->backoff) {
        s->backoff /= 2;
    }
}

/* Spin while `cond` is false, for at most the spinner's budget, yielding the
 * core to any runnable process every few dozen checks (so a spinning waiter
 * never starves the process it waits for on a small machine).  With
 * `watch_lost` (the parent's waits for its workers), a yield after which `cond`
 * holds, long after `bell` was last stamped, ends the spin and skips spinning for a
 * while (see fv_spinner).  A worker's wait for a command does not watch: with
 * more workers than cores its yields run the pool's other workers, whose steps
 * outlast the post of the command, and its spin is what hands the core on.
 * Evaluates to whether `cond` came true. */
#define SPIN_UNTIL(cond, s, start, bell, watch_lost)                              \
    ({                                                                            \
        int64_t spin_end_ = (start) + (s)->spin_ns;                               \
        int iter_ = 0, lost_ = 0;                                                 \
        if ((s)->skip > 0) (s)->skip--;                                           \
        else while (!(cond) && (s)->spin_ns > 0) {                                \
            FV_CPU_RELAX();                                                       \
            if ((++iter_ & 63) == 0) {                                            \
                int64_t now_ = fv_now_ns();                                       \
                if (now_ >= spin_end_) break;                                     \
                sched_yield();                                                    \
                int64_t back_ = fv_now_ns();                                      \
                if ((watch_lost) && back_ - now_ > FV_LOST_YIELD_NS && (cond) &&   \
                    back_ - atomic_load_explicit(BELL_TIME(bell),                 \
                                                 memory_order_relaxed)            \
                        > FV_LOST_YIELD_NS) {                                     \
                    lost_ = 1;                                                    \
                    break;                                                        \
                }                                                                 \
            }                                                                     \
        }                                                                         \
        if (iter_ >= 64) after_yields((s), lost_);                                \
        (cond);                                                                   \
    })

/* Learn from a wait that had to sleep: if it ended within the longest allowed
 * spin, spin a little longer than it took next time; if it was longer (or timed
 * out), halve the budget, so waiters that always wait long stop spinning. */
static void adapt(fv_spinner *s, int64_t waited_ns, int reached) {
    if (reached && waited_ns <= s->max_spin_ns) {
        int64_t want = waited_ns + waited_ns / 2;
        s->spin_ns = want < s->max_spin_ns ? want : s->max_spin_ns;
    } else {
        s->spin_ns /= 2;
    }
}

int fv_wait_change(const uint32_t *word, uint32_t old, uint32_t *bell, int64_t deadline_ns,
                   fv_spinner *s) {
    int64_t start = fv_now_ns();
    if (SPIN_UNTIL(fv_load(word) != old, s, start, bell, 0)) return FV_OK;
    for (;;) {
        /* Read the bell before the word: a ring after this read changes the bell,
         * so the sleep below returns at once and no wake-up is lost. */
        uint32_t rung = atomic_load(AS_ATOMIC(bell));
        int reached = fv_load(word) != old;
        int64_t now = fv_now_ns();
        if (reached || now >= deadline_ns) {
            adapt(s, now - start, reached);
            return reached ? FV_OK : FV_TIMEOUT;
        }
        sleep_on(bell, rung, deadline_ns);
    }
}

static int count_ready(const uint32_t *words, int n, int stride, const uint32_t *expected,
                       const uint8_t *active) {
    int ready = 0;
    for (int i = 0; i < n; i++)
        if (active[i] && fv_load(words + (int64_t)i * stride) == expected[i]) ready++;
    return ready;
}

int fv_wait_count(const uint32_t *words, int n, int stride_words, const uint32_t *expected,
                  const uint8_t *active, int want, uint32_t *bell, int64_t deadline_ns,
                  fv_spinner *s) {
    int64_t start = fv_now_ns();
    if (SPIN_UNTIL(count_ready(words, n, stride_words, expected, active) >= want, s, start,
                   bell, 1))
        return count_ready(words, n, stride_words, expected, active);
    for (;;) {
        uint32_t rung = atomic_load(AS_ATOMIC(bell));
        int ready = count_ready(words, n, stride_words, expected, active);
        int64_t now = fv_now_ns();
        if (ready >= want || now >= deadline_ns) {
            adapt(s, now - start, ready >= want);
            return ready;
        }
        sleep_on(bell, rung, deadline_ns);
    }
}

int fv_set_parent_death_signal(int sig) {
#ifdef __linux__
    return prctl(PR_SET_PDEATHSIG, sig) == 0 ? 0 : -1;
#else
    (void)sig;
    return -1;
#endif
}
