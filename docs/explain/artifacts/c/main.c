/* Run presk_loss on the inputs in files, write its outputs to files, and (with
 * --expected DIR) compare them with the native backend's bit for bit.
 *
 *   presk_loss [--inputs DIR] [--outputs DIR] [--expected DIR] [--repeat N]
 *
 * A buffer's file is DIR/<name>.bin: its elements row-major, little-endian, in the
 * buffer's storage type (f64, f32, or the 16 bits of a bf16). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "presk_rt.h"

typedef struct buffer {
    const char *name;   /* the Presk name */
    const char *file;   /* <file>.bin */
    const char *type;   /* its listing type */
    presk_type element;
    size_t count;
    void *data;
} buffer;

static buffer inputs[] = {
    {"\316\270.blocks.norm.\316\263", "theta_blocks_norm_gamma", "bf16[3, 4]", PRESK_BF16, 12u, NULL},
    {"\316\270.blocks.proj.w", "theta_blocks_proj_w", "f32[3, 4, 4]", PRESK_F32, 48u, NULL},
    {"\316\270.blocks.proj.b", "theta_blocks_proj_b", "bf16[3, 4]", PRESK_BF16, 12u, NULL},
    {"\316\270.final.\316\263", "theta_final_gamma", "bf16[4]", PRESK_BF16, 4u, NULL},
    {"batch.0", "batch_0", "f64[4, 4]", PRESK_F64, 16u, NULL},
    {"batch.1", "batch_1", "f64[4, 4]", PRESK_F64, 16u, NULL},
};
static buffer outputs[] = {
    {"result", "result", "f64[]", PRESK_F64, 1u, NULL},
};

#define N_INPUTS (sizeof inputs / sizeof inputs[0])
#define N_OUTPUTS (sizeof outputs / sizeof outputs[0])

static size_t element_bytes(presk_type t) { return t == PRESK_F64 ? 8 : t == PRESK_F32 ? 4 : 2; }

/* Element i as its bits, little-endian in memory whatever the host's byte order. */
static uint64_t get_bits(const buffer *b, const unsigned char *bytes, size_t i)
{
    const size_t w = element_bytes(b->element);
    uint64_t u = 0;
    for (size_t k = 0; k < w; k++) u |= (uint64_t)bytes[i * w + k] << (8 * k);
    return u;
}

static void put_bits(const buffer *b, unsigned char *bytes, size_t i, uint64_t u)
{
    const size_t w = element_bytes(b->element);
    for (size_t k = 0; k < w; k++) bytes[i * w + k] = (unsigned char)(u >> (8 * k));
}

/* Between the file's bytes and the buffer's native elements. */
static void from_le(const buffer *b, void *data, const unsigned char *bytes)
{
    for (size_t i = 0; i < b->count; i++) {
        const uint64_t u = get_bits(b, bytes, i);
        const uint32_t v = (uint32_t)u;
        if (b->element == PRESK_F64) memcpy((double *)data + i, &u, 8);
        else if (b->element == PRESK_F32) memcpy((float *)data + i, &v, 4);
        else ((uint16_t *)data)[i] = (uint16_t)u;
    }
}

static uint64_t bits_of(const buffer *b, const void *data, size_t i)
{
    if (b->element == PRESK_F64) { uint64_t u; memcpy(&u, (const double *)data + i, 8); return u; }
    if (b->element == PRESK_F32) { uint32_t u; memcpy(&u, (const float *)data + i, 4); return u; }
    return ((const uint16_t *)data)[i];
}

static int is_nan(presk_type t, uint64_t u)
{
    if (t == PRESK_F64) return (u & UINT64_C(0x7FFFFFFFFFFFFFFF)) > UINT64_C(0x7FF0000000000000);
    if (t == PRESK_F32) return (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (u & 0x7FFFu) > 0x7F80u;
}

static char *path_of(const char *dir, const buffer *b)
{
    const size_t n = strlen(dir) + strlen(b->file) + 6;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s.bin", dir, b->file);
    return p;
}

/* Read buffer b's file from dir into data; 0 on success, else a line on stderr. */
static int load(const char *dir, const buffer *b, void *data)
{
    const size_t n = b->count * element_bytes(b->element);
    char *path = path_of(dir, b);
    unsigned char *bytes = malloc(n + 1);
    FILE *f = path ? fopen(path, "rb") : NULL;
    int ok = f && bytes && fread(bytes, 1, n + 1, f) == n;
    if (ok) from_le(b, data, bytes);
    else fprintf(stderr, "presk_loss: %s: cannot read %lu bytes (%s %s)\n", path ? path : dir,
                 (unsigned long)n, b->name, b->type);
    if (f) fclose(f);
    free(bytes);
    free(path);
    return ok ? 0 : 1;
}

static int save(const char *dir, const buffer *b)
{
    const size_t n = b->count * element_bytes(b->element);
    char *path = path_of(dir, b);
    unsigned char *bytes = malloc(n + 1);
    FILE *f = path ? fopen(path, "wb") : NULL;
    int ok = f && bytes;
    if (ok) {
        for (size_t i = 0; i < b->count; i++) put_bits(b, bytes, i, bits_of(b, b->data, i));
        ok = fwrite(bytes, 1, n, f) == n;
    }
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "presk_loss: %s: cannot write\n", path ? path : dir);
    free(bytes);
    free(path);
    return ok ? 0 : 1;
}

/* One line per output: equal bit for bit (any NaN for a NaN), or the first difference. */
static int compare(const char *dir, const buffer *b)
{
    void *want = malloc(b->count * element_bytes(b->element) + 1);
    if (!want || load(dir, b, want)) { free(want); return 1; }
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < b->count; i++) {
        const uint64_t g = bits_of(b, b->data, i), w = bits_of(b, want, i);
        if (g != w && !(is_nan(b->element, g) && is_nan(b->element, w)) && differ++ == 0) first = i;
    }
    if (differ == 0) {
        printf("  %s %s: %lu element%s bit for bit\n", b->name, b->type,
               (unsigned long)b->count, b->count == 1 ? "" : "s");
    } else {
        printf("  %s %s: %lu of %lu elements differ (first at %lu: 0x%llx, native 0x%llx)\n",
               b->name, b->type, (unsigned long)differ, (unsigned long)b->count,
               (unsigned long)first, (unsigned long long)bits_of(b, b->data, first),
               (unsigned long long)bits_of(b, want, first));
    }
    free(want);
    return differ != 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: presk_loss [--inputs DIR] [--outputs DIR] [--expected DIR] "
                    "[--repeat N]\n");
}

int main(int argc, char **argv)
{
    const char *in_dir = "inputs", *out_dir = "outputs", *expected = NULL;
    long repeat = 0;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) { usage(); return 2; }
        if (!strcmp(argv[i], "--inputs")) in_dir = value;
        else if (!strcmp(argv[i], "--outputs")) out_dir = value;
        else if (!strcmp(argv[i], "--expected")) expected = value;
        else if (!strcmp(argv[i], "--repeat")) repeat = strtol(value, NULL, 10);
        else { usage(); return 2; }
        i++;
    }
    int failed = 0;
    for (size_t i = 0; i < N_INPUTS; i++) {
        inputs[i].data = malloc(inputs[i].count * element_bytes(inputs[i].element) + 1);
        failed |= !inputs[i].data || load(in_dir, &inputs[i], inputs[i].data);
    }
    for (size_t i = 0; i < N_OUTPUTS; i++) {
        outputs[i].data = calloc(outputs[i].count + 1, element_bytes(outputs[i].element));
        failed |= !outputs[i].data;
    }
    void *arena = malloc(PRESK_LOSS_ARENA_BYTES + 1);
    if (failed || !arena) return 2;
    presk_loss_inputs in;
    presk_loss_outputs out;
    in.theta_blocks_norm_gamma = inputs[0].data;
    in.theta_blocks_proj_w = inputs[1].data;
    in.theta_blocks_proj_b = inputs[2].data;
    in.theta_final_gamma = inputs[3].data;
    in.batch_0 = inputs[4].data;
    in.batch_1 = inputs[5].data;
    out.result = outputs[0].data;
    presk_loss(&in, &out, arena);
    if (repeat > 0) {
        const clock_t start = clock();
        for (long r = 0; r < repeat; r++) presk_loss(&in, &out, arena);
        const double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
        printf("time per call: %.3f us (%ld calls, processor time)\n", seconds / repeat * 1e6,
               repeat);
    }
    for (size_t i = 0; i < N_OUTPUTS; i++) failed |= save(out_dir, &outputs[i]);
    if (expected) {
        printf("presk_loss compared with the native backend's outputs in %s:\n", expected);
        for (size_t i = 0; i < N_OUTPUTS; i++) failed |= compare(expected, &outputs[i]);
    }
    for (size_t i = 0; i < N_INPUTS; i++) free(inputs[i].data);
    for (size_t i = 0; i < N_OUTPUTS; i++) free(outputs[i].data);
    free(arena);
    return failed ? 1 : 0;
}
