/*
 * unit.h - what the engine's C unit tests share (tests/native/test_*.c, run
 * in one program by main.c; built by stress/Makefile).
 *
 * Plain C, no framework: CHECK(expr) counts a pass or prints file:line and
 * the failing expression.  Every test frees what it creates.  Besides the
 * harness: the two dialects most tests use, and helpers over the engine
 * (sorted lookups, (pattern, id) pair lists, chunk buffers, a trie's
 * contents through iteration, tests run in a forked child under a watchdog),
 * defined in unit.c.
 */
#ifndef CSTRIE_UNIT_H
#define CSTRIE_UNIT_H

#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstrie.h"
#include "support.h"

/* ------------------------------------------------------------------------
 * Tiny harness
 * ---------------------------------------------------------------------- */

extern long g_pass, g_fail;

#define CHECK(e)                                                                  \
    do {                                                                          \
        if (e) {                                                                  \
            g_pass++;                                                             \
        } else {                                                                  \
            g_fail++;                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #e); \
        }                                                                         \
    } while (0)

/* CHECK_EQ: integers, printing both values on failure. */
#define CHECK_EQ(a, b)                                                             \
    do {                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                      \
        if (va_ == vb_) {                                                          \
            g_pass++;                                                              \
        } else {                                                                   \
            g_fail++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n",      \
                    __FILE__, __LINE__, #a, #b, va_, vb_);                         \
        }                                                                          \
    } while (0)

/* cst_check(t, strict) == 0, printing the checker's message on failure. */
#define CHECK_TRIE(t, strict)                                                        \
    do {                                                                             \
        char msg_[256];                                                              \
        int rc_ = cst_check((t), (strict), msg_, sizeof msg_);                       \
        if (rc_ == 0) {                                                              \
            g_pass++;                                                                \
        } else {                                                                     \
            g_fail++;                                                                \
            fprintf(stderr, "%s:%d: cst_check(%s, strict=%d) = %d: %s\n", __FILE__,   \
                    __LINE__, #t, (strict), rc_, msg_);                              \
        }                                                                            \
    } while (0)

#define STRICT(t) CHECK_TRIE(t, 1)
#define S(lit) (lit), (sizeof(lit) - 1)

/* Progress counter read by the watchdog of isolated (forked) tests. */
extern _Atomic long g_progress;
#define PROGRESS() atomic_fetch_add_explicit(&g_progress, 1, memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Dialects
 * ---------------------------------------------------------------------- */

extern const cst_dialect amqp, mqtt;

/* ------------------------------------------------------------------------
 * Helpers over the engine (unit.c)
 * ---------------------------------------------------------------------- */

int cmp_u64(const void *a, const void *b);
/* Sorted lookup result; returns count or < 0.  *out is malloc'ed. */
int64_t lookup_sorted(cst_trie *t, const char *topic, size_t len, uint64_t **out);
int sorted_has_dups(const uint64_t *v, size_t n);

/* A (pattern, id) pair and sorted pair lists. */
typedef struct pair {
    char *pat;
    size_t plen;
    uint64_t id;
} pair;

typedef struct pairs {
    pair *v;
    size_t n, cap;
    int err;                   /* < 0: the iteration failed */
    long calls;                /* cst_iter_next calls that returned entries */
} pairs;

void pairs_add(pairs *ps, const char *p, size_t plen, uint64_t id);
int pair_cmp(const void *a, const void *b);
void pairs_sort(pairs *ps);
void pairs_free(pairs *ps);
int pairs_equal(const pairs *a, const pairs *b);
int pairs_has_dups(const pairs *ps);

/* Chunk buffers for cst_match / cst_iter_next. */
typedef struct cbuf {
    cst_chunk g;
} cbuf;

void cbuf_init(cbuf *b, size_t pat_cap, size_t ids_cap, size_t entries_cap);
void cbuf_grow(cbuf *b, size_t pat_cap, size_t ids_cap, size_t entries_cap);
void cbuf_free(cbuf *b);
/* Append every (pattern, id) of the entries in g to ps; counts empty entries. */
void chunk_to_pairs(const cst_chunk *g, size_t nentries, pairs *ps, long *empty_entries);
extern long g_iter_empty_entries; /* partial entries with no ids (reported, not failed) */
/* Every (pattern, id) of t through cst_iter_*, with the given buffer sizes
 * (grown on CST_ETRUNC as the need_* fields ask), sorted. */
pairs content_bufs(cst_trie *t, size_t pat_cap, size_t ids_cap, size_t entries_cap);
pairs content(cst_trie *t);

int64_t live_after_reclaim(void);
/* Nothing leaked since `start` (the caller freed every trie it made). */
#define CHECK_NO_LEAK(start)                                   \
    do {                                                       \
        CHECK_EQ(cst_reclaim(), 0);                            \
        CHECK_EQ(cst_live_allocations(), (start));             \
    } while (0)

int sub(cst_trie *t, const char *p, uint64_t id);
int unsub(cst_trie *t, const char *p, uint64_t id);
/* Count-only queries pass a valid buffer with capacity 0 (NULL is covered by
 * test_count_only_null_buffer, which runs isolated). */
extern uint64_t g_nobuf[1];
#define NOBUF g_nobuf, 0
int64_t nlook(cst_trie *t, const char *topic);
/* Lookup of topic gives exactly the ids listed (terminated by UINT64_MAX). */
int lookup_is(cst_trie *t, const char *topic, const uint64_t *want);
#define END UINT64_MAX
#define LOOKUP_IS(t, topic, ...)                                   \
    do {                                                           \
        static const uint64_t want_[] = {__VA_ARGS__};             \
        CHECK(lookup_is((t), (topic), want_));                     \
    } while (0)

/* Run fn in a forked child with a progress watchdog: a hang or crash is a
 * reported failure.  The child's pass/fail counts come back through a pipe. */
void run_isolated(const char *name, void (*fn)(void), int stall_limit_s);

/* ------------------------------------------------------------------------
 * The tests, by file (main.c runs them in its order)
 * ---------------------------------------------------------------------- */

/* test_trie.c */
void test_subscribe_unsubscribe(void);
void test_big_subscriber_set(void);
void test_wide_level(void);
void test_collisions(void);

/* test_words.c */
void test_forbidden_and_max_levels(void);
void test_deep_levels(void);

/* test_lookup.c */
void test_amqp_lookup(void);
void test_mqtt_lookup(void);
void test_has_subscribers(void);
void test_match_chunk(void);
void test_subscribers(void);
void test_lookup_batch(void);
void test_count_only_null_buffer(void);
void test_answer_each_once(void);
void test_multi_wildcards(void);
void test_walk_one_state(void);

/* test_snapshots.c */
void test_snapshots(void);
void test_clear(void);
void test_len_and_iteration(void);

/* test_alloc.c */
void test_oom(void);
void test_alloc_counters(void);

/* test_ebr.c */
void test_idle_thread_garbage(void);
void test_prompt_reclaim(void);
void test_fork_reclaims(void);

/* test_build.c */
void test_block_build(void);
void test_build_offsets(void);

/* test_numbering.c */
void test_numbering(void);

/* test_share_groups.c */
void test_share_groups(void);

/* test_topic_index.c */
void test_topic_index(void);

/* test_cache.c */
void test_cache(void);
/* test_warm.c */
void test_warm(void);

#endif
