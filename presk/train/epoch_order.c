/* The epoch order of a shuffled stream (presk/train/data.py `epoch_order`), computed as
 * numpy computes
 *
 *     np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch])))
 *         .permutation(count)
 *
 * in C, bit for bit: numpy's SeedSequence (its pool of 4 words mixed from the entropy, then
 * generate_state(4, uint64)), PCG64's seeding (pcg_setseq_128_srandom_r) and its XSL-RR
 * output, the 32-bit draws numpy buffers from each 64-bit one (pcg64_next32), its bounded
 * draw by masked rejection (random_interval) and Generator.shuffle's Fisher–Yates from the
 * last place down (_shuffle_raw) over arange(count). The entropy words are the caller's
 * (numpy's _int_to_uint32_array of seed, then of epoch: little-endian 32-bit words, 0 as
 * one word). presk/train/native_order.py builds and calls it; test_native_order compares
 * it with numpy over many seeds, epochs and counts. */

#include <stdint.h>

typedef unsigned __int128 u128;

#define INIT_A 0x43b0d7e5u
#define MULT_A 0x931e8875u
#define INIT_B 0x8b51f9ddu
#define MULT_B 0x58f38dedu
#define MIX_MULT_L 0xca01f9ddu
#define MIX_MULT_R 0x4973f715u
#define POOL 4

static uint32_t hashmix(uint32_t value, uint32_t *hash_const) {
    value ^= *hash_const;
    *hash_const *= MULT_A;
    value *= *hash_const;
    value ^= value >> 16;
    return value;
}

static uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t result = MIX_MULT_L * x - MIX_MULT_R * y;
    result ^= result >> 16;
    return result;
}

/* SeedSequence.mix_entropy: the pool from the entropy words. */
static void mix_entropy(const uint32_t *entropy, int64_t n, uint32_t pool[POOL]) {
    uint32_t hash_const = INIT_A;
    for (int i = 0; i < POOL; i++)
        pool[i] = hashmix(i < n ? entropy[i] : 0u, &hash_const);
    for (int src = 0; src < POOL; src++)
        for (int dst = 0; dst < POOL; dst++)
            if (src != dst)
                pool[dst] = mix(pool[dst], hashmix(pool[src], &hash_const));
    for (int64_t src = POOL; src < n; src++)
        for (int dst = 0; dst < POOL; dst++)
            pool[dst] = mix(pool[dst], hashmix(entropy[src], &hash_const));
}

typedef struct {
    u128 state, inc;
    int has_uint32;
    uint32_t uinteger;
} pcg64;

static const u128 PCG_MULT = ((u128)2549297995355413924ULL << 64) | 4865540595714422341ULL;

static void pcg_step(pcg64 *g) { g->state = g->state * PCG_MULT + g->inc; }

/* SeedSequence.generate_state(4, uint64) (8 words, paired little-endian), then
 * PCG64's seeding: state from the first two 64-bit words, increment from the last two. */
static void pcg_seed(pcg64 *g, const uint32_t pool[POOL]) {
    uint32_t hash_const = INIT_B, w[8];
    for (int i = 0; i < 8; i++) {
        uint32_t v = pool[i % POOL];
        v ^= hash_const;
        hash_const *= MULT_B;
        v *= hash_const;
        v ^= v >> 16;
        w[i] = v;
    }
    uint64_t u[4];
    for (int i = 0; i < 4; i++) u[i] = (uint64_t)w[2 * i] | ((uint64_t)w[2 * i + 1] << 32);
    u128 initstate = ((u128)u[0] << 64) | u[1], initseq = ((u128)u[2] << 64) | u[3];
    g->state = 0;
    g->inc = (initseq << 1) | 1u;
    pcg_step(g);
    g->state += initstate;
    pcg_step(g);
    g->has_uint32 = 0;
    g->uinteger = 0;
}

static uint64_t next64(pcg64 *g) {
    pcg_step(g);
    uint64_t x = (uint64_t)(g->state >> 64) ^ (uint64_t)g->state;
    unsigned r = (unsigned)(g->state >> 122);
    return (x >> r) | (x << ((64u - r) & 63u));
}

static uint32_t next32(pcg64 *g) {
    if (g->has_uint32) {
        g->has_uint32 = 0;
        return g->uinteger;
    }
    uint64_t next = next64(g);
    g->has_uint32 = 1;
    g->uinteger = (uint32_t)(next >> 32);
    return (uint32_t)(next & 0xffffffffu);
}

/* random_interval: uniform on [0, max] by masked rejection. */
static uint64_t interval(pcg64 *g, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, value;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xffffffffu) {
        while ((value = (next32(g) & mask)) > max) {
        }
    } else {
        while ((value = (next64(g) & mask)) > max) {
        }
    }
    return value;
}

/* out[0..count): the permutation. */
void presk_epoch_order(const uint32_t *entropy, int64_t n_entropy, int64_t count,
                       int64_t *out) {
    uint32_t pool[POOL];
    pcg64 g;
    mix_entropy(entropy, n_entropy, pool);
    pcg_seed(&g, pool);
    for (int64_t i = 0; i < count; i++) out[i] = i;
    for (int64_t i = count - 1; i >= 1; i--) {
        int64_t j = (int64_t)interval(&g, (uint64_t)i);
        int64_t t = out[j];
        out[j] = out[i];
        out[i] = t;
    }
}

/* The orders of epochs first … first + epochs − 1 of one seed, each cut to its first
 * `keep` places (a stream's whole batches), one after another from out: what a native
 * training step reads when one call runs across epochs' ends (presk/train/data.py
 * `Stream.places`). One call for them all: the caller's Python costs about as much as
 * one epoch's draws. Each permutation is drawn in place over `count` places, in epoch
 * order, so an epoch's `count − keep` dropped places land where the next one then goes:
 * out has room for epochs · keep + (count − keep) int64s. The entropy of epoch e is the
 * seed's words followed by e's (little-endian 32-bit words, 0 as one word: numpy's
 * _int_to_uint32_array). */
void presk_epoch_orders(const uint32_t *seed_words, int64_t n_seed, int64_t first,
                        int64_t epochs, int64_t count, int64_t keep, int64_t *out) {
    uint32_t entropy[n_seed + 2];
    for (int64_t i = 0; i < n_seed; i++) entropy[i] = seed_words[i];
    for (int64_t k = 0; k < epochs; k++) {
        uint64_t e = (uint64_t)(first + k);
        int64_t n = n_seed;
        entropy[n++] = (uint32_t)e;
        if (e >> 32) entropy[n++] = (uint32_t)(e >> 32);
        presk_epoch_order(entropy, n, count, out + k * keep);
    }
}
