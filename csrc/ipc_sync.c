/* The step barrier; see ipc_sync.h. */
#define _GNU_SOURCE
#include "ipc_sync.h"

#include <errno.h>
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

#define AS_ATOMIC(p) ((_Atomic uint32_t *)(p))

void fv_spinner_init(fv_spinner *s, int64_t max_spin_ns) {
    s->max_spin_ns = max_spin_ns > 0 ? max_spin_ns : 0;
    s->spin_ns = s->max_spin_ns / 4;
}

int64_t fv_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

uint32_t fv_load(const uint32_t *word) {
    return atomic_load_explicit(AS_ATOMIC(word), memory_order_acquire);
}

static void wake_all(uint32_t *word) {
#ifdef __linux__
    syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
#else
    (void)word;
#endif
}

void fv_store(uint32_t *word, uint32_t value) {
    atomic_store_explicit(AS_ATOMIC(word), value, memory_order_release);
}

void fv_publish(uint32_t *word, uint32_t value) {
    fv_store(word, value);
    wake_all(word);
}

void fv_ring(uint32_t *bell) {
    atomic_fetch_add_explicit(AS_ATOMIC(bell), 1u, memory_order_acq_rel);
    wake_all(bell);
}

/* Sleep until *word may have changed from `seen`, at most until deadline. */
static void sleep_on(uint32_t *word, uint32_t seen, int64_t deadline_ns) {
    int64_t left = deadline_ns - fv_now_ns();
    if (left <= 0) return;
    if (left > FV_MAX_SLEEP_NS) left = FV_MAX_SLEEP_NS;
#ifdef __linux__
    struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
#else
    /* Portable fallback: short sleeps, growing with nothing but the deadline. */
    (void)word; (void)seen;
    struct timespec ts = {0, left < 50000 ? (long)left : 50000L};
    nanosleep(&ts, NULL);
#endif
}

/* Spin while `cond` is false, for at most the spinner's budget; adapt it. */
#define SPIN_UNTIL(cond, s)                                                       \
    do {                                                                          \
        if ((s)->spin_ns > 0) {                                                   \
            int64_t spin_end = fv_now_ns() + (s)->spin_ns;                        \
            int iter = 0;                                                         \
            while (!(cond)) {                                                     \
                FV_CPU_RELAX();                                                   \
                if ((++iter & 63) == 0 && fv_now_ns() >= spin_end) break;         \
            }                                                                     \
        }                                                                         \
        if (cond) {                                                               \
            int64_t grown = (s)->spin_ns * 2 + 1000;                              \
            (s)->spin_ns = grown < (s)->max_spin_ns ? grown : (s)->max_spin_ns;   \
        } else {                                                                  \
            (s)->spin_ns /= 2;                                                    \
        }                                                                         \
    } while (0)

int fv_wait_change(uint32_t *word, uint32_t old, int64_t deadline_ns, fv_spinner *s) {
    SPIN_UNTIL(fv_load(word) != old, s);
    for (;;) {
        if (fv_load(word) != old) return FV_OK;
        if (fv_now_ns() >= deadline_ns) return FV_TIMEOUT;
        sleep_on(word, old, deadline_ns);
    }
}

static int count_ready(uint32_t *words, int n, int stride, const uint32_t *expected,
                       const uint8_t *active) {
    int ready = 0;
    for (int i = 0; i < n; i++)
        if (active[i] && fv_load(words + (int64_t)i * stride) == expected[i]) ready++;
    return ready;
}

int fv_wait_count(uint32_t *words, int n, int stride_words, const uint32_t *expected,
                  const uint8_t *active, int want, uint32_t *bell, int64_t deadline_ns,
                  fv_spinner *s) {
    SPIN_UNTIL(count_ready(words, n, stride_words, expected, active) >= want, s);
    for (;;) {
        /* Read the bell before counting: a ring after the count changes it, so
         * the sleep below returns at once and no wake-up is lost. */
        uint32_t rung = fv_load(bell);
        int ready = count_ready(words, n, stride_words, expected, active);
        if (ready >= want || fv_now_ns() >= deadline_ns) return ready;
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
