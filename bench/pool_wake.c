/* A split launch after the pool's workers fell asleep (bench/pool.py builds it with
 * presk/runtime/presk_pool.c): each round sleeps `gap` µs, then times one launch of two
 * parts whose work is nil on the pool, and after another gap the same parts on a thread
 * started and joined for the launch. Prints the minimum and median of each, in µs:
 *   pool <min> <median> threads <min> <median> */
#define _POSIX_C_SOURCE 200809L

#include "presk_pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double sink[16];
static void part0(void *a) { (void)a; sink[0] += 1; }
static void part1(void *a) { (void)a; sink[8] += 1; }
static void *thread(void *a) { part1(a); return NULL; }

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int ascending(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 200;
    const long gap = argc > 2 ? atol(argv[2]) : 1000;
    double *pool = malloc(sizeof *pool * (size_t)rounds), *own = malloc(sizeof *own * (size_t)rounds);
    if (!pool || !own || rounds < 1) return 2;
    const struct timespec pause = {gap / 1000000, (gap % 1000000) * 1000};
    presk_part const fns[2] = {part0, part1};
    presk_pool_run(2, fns, NULL);  /* start the worker */
    for (int i = 0; i < rounds; i++) {
        nanosleep(&pause, NULL);
        double t = now_us();
        presk_pool_run(2, fns, NULL);
        pool[i] = now_us() - t;
        nanosleep(&pause, NULL);
        t = now_us();
        pthread_t th;
        pthread_create(&th, NULL, thread, NULL);
        part0(NULL);
        pthread_join(th, NULL);
        own[i] = now_us() - t;
    }
    qsort(pool, (size_t)rounds, sizeof *pool, ascending);
    qsort(own, (size_t)rounds, sizeof *own, ascending);
    printf("pool %.2f %.2f threads %.2f %.2f\n", pool[0], pool[rounds / 2], own[0],
           own[rounds / 2]);
    free(pool);
    free(own);
    return 0;
}
