/* The Presk worker pool (presk_pool.h).
 *
 * One word, `pool.word`, publishes a launch: a generation counter in its upper bits and
 * the launch's number of parts in its low 8 (POOL_STOP: stop). A second, `pool.claim`,
 * holds the same generation and the next part not yet taken. Parts 1… are taken by
 * compare-and-swap on `claim` — by any worker that sees the launch and by the caller once
 * it has run part 0 — so a part waits for no thread in particular: on a machine with no
 * free core the caller runs them all itself, at one thread's cost. A claim carries its
 * generation, so a worker that wakes late can never take a later launch's part for its
 * own. Whoever runs a part counts `pool.pending` down; the caller returns when it is 0,
 * so the launch's functions and arguments stay valid (and unchanged) while any part runs.
 *
 * Waiting is a bounded spin (back-to-back launches cost no sleep), then a bounded number
 * of polls that yield the core, then a condition variable. A sleeper registers in
 * `sleepers` (or `waiting`) before it reads the word (or `pending`) a last time, and the
 * writer reads the register after its write, all sequentially consistent: one of the two
 * sees the other, and the writer signals under the mutex the sleeper holds until it
 * waits, so no wakeup is lost.
 *
 * Atomics are the GCC/Clang `__atomic` builtins (the export compiles as C99). */
#define _POSIX_C_SOURCE 200809L

#include "presk_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX 64        /* workers besides the caller */
#define POOL_STOP 0xFFu    /* the parts field of the word that stops every worker */
#define POOL_SPIN 20       /* polls with a pause (PRESK_POOL_SPIN overrides) */
#define POOL_YIELD 200     /* then polls with sched_yield (PRESK_POOL_YIELD), then sleep */

#if defined(__x86_64__) || defined(__i386__)
#define POOL_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define POOL_RELAX() __asm__ __volatile__("yield")
#else
#define POOL_RELAX() ((void)0)
#endif

static struct {
    pthread_mutex_t launch;  /* one launch (or start, or stop) at a time */
    pthread_mutex_t sleep;   /* what sleepers hold until they wait */
    pthread_cond_t wake;     /* workers sleep here for the next word */
    pthread_cond_t done;     /* the caller sleeps here for pending = 0 */
    pthread_t threads[POOL_MAX];
    uint64_t seen[POOL_MAX]; /* the word each worker starts from */
    int32_t started;         /* workers running (under `launch`) */
    uint64_t word;           /* atomic: generation << 8 | parts */
    uint64_t claim;          /* atomic: generation << 8 | the next part to take */
    int32_t pending;         /* atomic: parts of this launch still running */
    int32_t sleepers;        /* atomic: workers asleep or about to be */
    int32_t waiting;         /* atomic: 1 when the caller sleeps on `done` */
    int spin, yield;
    presk_part const *fns;   /* this launch's, valid until pending = 0 */
    void *args;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, {0}, {0}, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL};

static int registered;  /* atexit and atfork, once (under `launch`) */

static uint64_t load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

/* Between polls: a pause for the first `spin`, then a yield of the core (a shared or
 * oversubscribed machine may be running the thread we wait for on this one) `yield`
 * times; 0 when it is time to sleep. */
static int keep_polling(int i)
{
    if (i < pool.spin) {
        POOL_RELAX();
        return 1;
    }
    if (i < pool.spin + pool.yield) {
        sched_yield();
        return 1;
    }
    return 0;
}

/* The word once it differs from `seen`: poll, then sleep. */
static uint64_t next_word(uint64_t seen)
{
    uint64_t w;
    for (int i = 0;; i++) {
        if ((w = __atomic_load_n(&pool.word, __ATOMIC_ACQUIRE)) != seen) return w;
        if (!keep_polling(i)) break;
    }
    pthread_mutex_lock(&pool.sleep);
    __atomic_add_fetch(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
    while ((w = load(&pool.word)) == seen) pthread_cond_wait(&pool.wake, &pool.sleep);
    __atomic_sub_fetch(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&pool.sleep);
    return w;
}

/* A part of the launch `word` published, taken; -1 when none is left (or the launch is
 * over and another published). */
static int32_t take(uint64_t word)
{
    uint64_t c = __atomic_load_n(&pool.claim, __ATOMIC_ACQUIRE);
    for (;;) {
        if ((c >> 8) != (word >> 8) || (c & 0xFFu) >= (word & 0xFFu)) return -1;
        if (__atomic_compare_exchange_n(&pool.claim, &c, c + 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return (int32_t)(c & 0xFFu);
    }
}

/* Run the parts of `word` left to take; the last to finish wakes a sleeping caller. */
static void run_parts(uint64_t word)
{
    int32_t j;
    while ((j = take(word)) >= 0) {
        pool.fns[j](pool.args);
        if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_SEQ_CST) == 0
            && __atomic_load_n(&pool.waiting, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&pool.sleep);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.sleep);
        }
    }
}

static void *worker(void *index)
{
    uint64_t seen = pool.seen[(intptr_t)index];
    for (;;) {
        seen = next_word(seen);
        if ((seen & 0xFFu) == POOL_STOP) return NULL;
        run_parts(seen);
    }
}

/* Publish a word and wake the sleepers. */
static void publish(uint64_t word)
{
    __atomic_store_n(&pool.word, word, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&pool.sleepers, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&pool.sleep);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.sleep);
    }
}

/* The child of a fork has none of the parent's workers: it starts its own. */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&pool.launch, NULL);
    pthread_mutex_init(&pool.sleep, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.started = 0;
    pool.sleepers = 0;
    pool.waiting = 0;
}

static void stop_at_exit(void) { presk_pool_stop(); }

/* Workers up to `want` (under `launch`); fewer if a thread cannot be created. */
static void grow(int32_t want)
{
    if (!registered) {
        const char *spin = getenv("PRESK_POOL_SPIN"), *yield = getenv("PRESK_POOL_YIELD");
        pool.spin = spin ? atoi(spin) : POOL_SPIN;
        pool.yield = yield ? atoi(yield) : POOL_YIELD;
        atexit(stop_at_exit);
        pthread_atfork(NULL, NULL, after_fork_in_child);
        registered = 1;
    }
    if (want > POOL_MAX) want = POOL_MAX;
    while (pool.started < want) {
        const int32_t j = pool.started;
        pool.seen[j] = pool.word;
        if (pthread_create(&pool.threads[j], NULL, worker, (void *)(intptr_t)j) != 0)
            return;
        pool.started = j + 1;
    }
}

static void run_here(int32_t parts, presk_part const *fns, void *args)
{
    for (int32_t j = 0; j < parts; j++) fns[j](args);
}

void presk_pool_run(int32_t parts, presk_part const *fns, void *args)
{
    if (parts < 2 || (uint32_t)parts >= POOL_STOP || pthread_mutex_trylock(&pool.launch) != 0) {
        run_here(parts, fns, args);
        return;
    }
    grow(parts - 1);  /* fewer workers (no thread to be had): the caller takes more parts */
    pool.fns = fns;
    pool.args = args;
    __atomic_store_n(&pool.pending, parts - 1, __ATOMIC_SEQ_CST);
    const uint64_t word = (pool.word & ~(uint64_t)0xFFu) + 0x100u + (uint64_t)parts;
    __atomic_store_n(&pool.claim, (word & ~(uint64_t)0xFFu) | 1u, __ATOMIC_RELEASE);
    publish(word);
    fns[0](args);
    run_parts(word);
    int done = 0;
    for (int i = 0; !(done = __atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) == 0); i++)
        if (!keep_polling(i)) break;
    if (!done) {
        pthread_mutex_lock(&pool.sleep);
        __atomic_store_n(&pool.waiting, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&pool.pending, __ATOMIC_SEQ_CST) != 0)
            pthread_cond_wait(&pool.done, &pool.sleep);
        __atomic_store_n(&pool.waiting, 0, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&pool.sleep);
    }
    pthread_mutex_unlock(&pool.launch);
}

int32_t presk_pool_workers(void)
{
    pthread_mutex_lock(&pool.launch);
    const int32_t n = pool.started;
    pthread_mutex_unlock(&pool.launch);
    return n;
}

void presk_pool_stop(void)
{
    pthread_mutex_lock(&pool.launch);
    if (pool.started > 0) {
        publish((pool.word & ~(uint64_t)0xFFu) + 0x100u + POOL_STOP);
        for (int32_t j = 0; j < pool.started; j++) pthread_join(pool.threads[j], NULL);
        pool.started = 0;
    }
    pthread_mutex_unlock(&pool.launch);
}

/* ---- a thread's scratch blocks (presk_scratch) ---- */

typedef struct {
    void *block[PRESK_SCRATCH_SLOTS];
    int64_t bytes[PRESK_SCRATCH_SLOTS];
} scratch_blocks;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_release(void *p)
{
    scratch_blocks *s = p;
    for (int i = 0; i < PRESK_SCRATCH_SLOTS; i++)
        free(s->block[i]);
    free(s);
}

static void scratch_key_once(void) { pthread_key_create(&scratch_key, scratch_release); }

void *presk_scratch(int32_t slot, int64_t bytes)
{
    pthread_once(&scratch_once, scratch_key_once);
    scratch_blocks *s = pthread_getspecific(scratch_key);
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        if (s == NULL || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->bytes[slot] < bytes) {
        free(s->block[slot]);  /* a packed operand is rewritten whole: nothing to keep */
        s->block[slot] = malloc((size_t)bytes);
        s->bytes[slot] = s->block[slot] != NULL ? bytes : 0;
    }
    return s->block[slot];
}

/* ---- a host's large copy or f64 → f32 conversion on the pool (presk_host_copy) ---- */

#define HOST_PARTS 8 /* parts a host copy divides into at most */

typedef struct {
    char *dst;
    const char *src;
    int64_t n;      /* elements */
    int32_t size;   /* bytes an element (a copy) */
    int32_t narrow; /* 1: double → float, rounded to nearest (C's conversion, as fptrunc) */
    int32_t parts;
} host_job;

/* Part p's elements, [lo, hi): the parts' shares in whole 64-byte lines of f32. */
static void host_part(void *args, int32_t p)
{
    const host_job *j = args;
    int64_t lines = (j->n + 15) / 16;
    int64_t lo = lines * p / j->parts * 16, hi = lines * (p + 1) / j->parts * 16;
    if (hi > j->n)
        hi = j->n;
    if (lo >= hi)
        return;
    if (j->narrow) {
        float *d = (float *)j->dst;
        const double *s = (const double *)j->src;
        for (int64_t i = lo; i < hi; i++)
            d[i] = (float)s[i];
    } else {
        memcpy(j->dst + lo * j->size, j->src + lo * j->size, (size_t)((hi - lo) * j->size));
    }
}

#define HOST_PART(k) static void host_part##k(void *args) { host_part(args, k); }
HOST_PART(0) HOST_PART(1) HOST_PART(2) HOST_PART(3)
HOST_PART(4) HOST_PART(5) HOST_PART(6) HOST_PART(7)
static presk_part const host_parts[HOST_PARTS] = {host_part0, host_part1, host_part2,
                                                  host_part3, host_part4, host_part5,
                                                  host_part6, host_part7};

void presk_host_copy(void *dst, const void *src, int64_t n, int32_t size, int32_t narrow,
                     int32_t parts)
{
    host_job j = {dst, src, n, size, narrow,
                  parts < 1 ? 1 : parts > HOST_PARTS ? HOST_PARTS : parts};
    presk_pool_run(j.parts, host_parts, &j);
}
