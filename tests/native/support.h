/*
 * support.h - helpers shared by the engine's C test programs: the unit tests
 * (tests/native/, whose harness is unit.h), the torture programs
 * (stress/torture_trie.c, stress/torture_ebr.c), the fuzz targets and the
 * walk benchmark (stress/walk_engine.c).
 *
 * Allocation that aborts instead of returning NULL (the programs test the
 * engine's allocator, not the system's), a seeded splitmix64 stream, a
 * monotonic clock, and the brute-force reference matcher the engine's answers
 * are checked against: a dynamic program over (pattern word, topic word)
 * written straight from the dialect rules (docs/api.md, "Dialects"), with no
 * trie in it.  Everything is static inline, so a program that uses only part
 * of it compiles without unused-function warnings.
 */
#ifndef CSTRIE_TEST_SUPPORT_H
#define CSTRIE_TEST_SUPPORT_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstrie.h"

/* FAIL(fmt, ...): count a failure in the program's `g_failures` (an
 * _Atomic long it defines) and report the first 50 on stderr, prefixed with
 * PROGRAM_NAME (which it defines before including this header). */
#define FAIL(...)                                                               \
    do {                                                                        \
        long n_ = atomic_fetch_add(&g_failures, 1);                             \
        if (n_ < 50) {                                                          \
            fprintf(stderr, "%s: %s:%d: ", PROGRAM_NAME, __FILE__, __LINE__);   \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

static inline void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (p == NULL) {
        fputs("out of memory (system allocator)\n", stderr);
        abort();
    }
    return p;
}

static inline void *xrealloc(void *p, size_t sz)
{
    p = realloc(p, sz ? sz : 1);
    if (p == NULL) {
        fputs("out of memory (system allocator)\n", stderr);
        abort();
    }
    return p;
}

/* splitmix64: the next value of the stream whose state is *s. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------
 * Brute-force reference matcher
 * ---------------------------------------------------------------------- */

typedef struct sv {
    const char *p;
    size_t n;
} sv;

/* Split s on d's separator into *out (malloc'ed); the empty string is zero
 * words when zero_empty. */
static inline size_t split_words(const char *s, size_t len, const cst_dialect *d, sv **out,
                                 int zero_empty)
{
    size_t cap = 8, n = 0;
    sv *w = xcalloc(cap, sizeof *w);
    if (len == 0 && zero_empty) {
        *out = w;
        return 0;
    }
    size_t start = 0;
    for (;;) {
        size_t end = start;
        while (end < len && !(end + d->sep_len <= len && memcmp(s + end, d->sep, d->sep_len) == 0))
            end++;
        if (n == cap) {
            cap *= 2;
            w = xrealloc(w, cap * sizeof *w);
        }
        w[n++] = (sv){s + start, end - start};
        if (end >= len)
            break;
        start = end + d->sep_len;
    }
    *out = w;
    return n;
}

static inline int sv_is(sv w, const char *tok, size_t tlen)
{
    return tok != NULL && w.n == tlen && memcmp(w.p, tok, tlen) == 0;
}

/* Does pattern match topic under d (AMQP, MQTT or NATS-like rules)? */
static inline int ref_match(const cst_dialect *d, const char *pat, size_t plen, const char *top,
                            size_t tlen)
{
    sv *p, *t;
    size_t m = split_words(pat, plen, d, &p, d->empty_topic);
    size_t n = split_words(top, tlen, d, &t, d->empty_topic);
    /* dp[i][j]: p[i..] matches t[j..] */
    unsigned char *dp = xcalloc((m + 1) * (n + 1), 1);
#define DP(i, j) dp[(size_t)(i) * (n + 1) + (size_t)(j)]
    DP(m, n) = 1;
    for (size_t ii = m; ii-- > 0;) {
        for (size_t jj = n + 1; jj-- > 0;) {
            int r;
            if (sv_is(p[ii], d->multi, d->multi_len))
                r = DP(ii + 1, jj) || (jj < n && DP(ii, jj + 1));
            else if (sv_is(p[ii], d->single, d->single_len))
                r = jj < n && DP(ii + 1, jj + 1);
            else
                r = jj < n && p[ii].n == t[jj].n && memcmp(p[ii].p, t[jj].p, t[jj].n) == 0 &&
                    DP(ii + 1, jj + 1);
            DP(ii, jj) = (unsigned char)r;
        }
    }
    int res = DP(0, 0);
#undef DP
    if (res && d->dollar_rule && n > 0 && t[0].n > 0 && t[0].p[0] == '$' && m > 0 &&
        (sv_is(p[0], d->multi, d->multi_len) || sv_is(p[0], d->single, d->single_len)))
        res = 0;
    free(p);
    free(t);
    free(dp);
    return res;
}

#endif
