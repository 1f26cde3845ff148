/* The Presk worker pool: the threads a split kernel's parts run on.
 *
 * Started on the first split launch, grown to the largest split seen, stopped at exit.
 * A launch publishes its parts and their argument array; the caller runs part 0 itself and
 * returns when every part has finished. Used by the native backend (compiled once into a
 * shared library the JIT resolves `presk_pool_run` in) and by the C export. */
#ifndef PRESK_POOL_H
#define PRESK_POOL_H

#include <stdint.h>

/* A kernel's part: its buffer pointers in `args` (one per kernel argument). */
typedef void (*presk_part)(void *args);

/* Run fns[0](args) … fns[parts-1](args), fns[0] on the calling thread, the others on the
 * pool's workers; return when all have returned. A launch while another is under way
 * (another thread's, or a part's own) runs its parts one after the other on the caller. */
void presk_pool_run(int32_t parts, presk_part const *fns, void *args);

/* The workers running now (0 before the first split launch and after a stop). */
int32_t presk_pool_workers(void);

/* Scratch memory for a launch (a register tile's packed operands, which a launch writes
 * before it reads them): at least `bytes` bytes, the calling thread's own block number
 * `slot` (0 … PRESK_SCRATCH_SLOTS − 1). The block is kept for the thread's next launch
 * (grown when a launch wants more) and freed when the thread exits, so back-to-back
 * launches neither call malloc nor fault in fresh pages. NULL when out of memory. */
#define PRESK_SCRATCH_SLOTS 4
void *presk_scratch(int32_t slot, int64_t bytes);

/* A host's copy of n elements of `size` bytes (narrow = 0) or conversion of n doubles to
 * floats, each rounded to nearest (narrow = 1), from src to dst, divided among `parts`
 * (at most 8) of the pool: each element is written once, as one thread's loop would. */
void presk_host_copy(void *dst, const void *src, int64_t n, int32_t size, int32_t narrow,
                     int32_t parts);

/* Stop and join every worker (registered with atexit on the first start; a later launch
 * starts them again). */
void presk_pool_stop(void);

#endif
