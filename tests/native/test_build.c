/*
 * test_build.c - bulk builds (build.c): a trie built in node blocks, updated
 * by several threads, and offset tables that cst_build must refuse.
 */
#include <pthread.h>

#include "unit.h"

/* Bulk builds carve nodes from node blocks (alloc.c): a built trie answers
 * like the reference, can be updated by several threads at once (which free
 * carved nodes concurrently), and gives every node and block back. */
enum { BLOCK_PAIRS = 3000 };
typedef struct block_job {
    cst_trie *t;
    int first;
    char (*pat)[24];
    int removed; /* counted here: CHECK is for the main thread */
} block_job;

static void *block_unsubscribe_thread(void *arg)
{
    block_job *j = arg;
    for (int i = j->first; i < BLOCK_PAIRS; i += 2)
        j->removed += cst_unsubscribe(j->t, j->pat[i], strlen(j->pat[i]), (uint64_t)(i % 41) + 1) == 1;
    return NULL;
}

void test_block_build(void)
{
    int64_t start = live_after_reclaim();
    cst_debug_set_block_threshold(0);
    char(*pat)[24] = xcalloc(BLOCK_PAIRS, sizeof *pat);
    char *data = xcalloc(BLOCK_PAIRS, 24);
    int64_t *off = xcalloc(BLOCK_PAIRS + 1, sizeof *off);
    uint64_t *ids = xcalloc(BLOCK_PAIRS, sizeof *ids);
    for (int i = 0; i < BLOCK_PAIRS; i++) {
        static const char *tail[] = {"x", "+", "#"};
        int l = snprintf(pat[i], sizeof pat[i], "t/%d/d%d/%s", i % 37, i, tail[i % 3]);
        memcpy(data + off[i], pat[i], (size_t)l);
        off[i + 1] = off[i] + l;
        ids[i] = (uint64_t)(i % 41) + 1;
    }
    int st;
    int64_t bad;
    cst_trie *t = cst_build(&mqtt, data, (size_t)BLOCK_PAIRS * 24, off, ids, BLOCK_PAIRS, 41, NULL,
                            &st, &bad);
    CHECK(t != NULL);
    CHECK_TRIE(t, 1);
    CHECK_EQ(cst_len(t), BLOCK_PAIRS);
    const char *topics[] = {"t/5/d5/x", "t/5/d42/x", "t/0/d0/x/y", "t/1/d1/q"};
    for (size_t k = 0; k < sizeof topics / sizeof *topics; k++) {
        uint64_t *got;
        int64_t n = lookup_sorted(t, topics[k], strlen(topics[k]), &got);
        uint64_t want[BLOCK_PAIRS];
        size_t nw = 0;
        for (int i = 0; i < BLOCK_PAIRS; i++)
            if (ref_match(&mqtt, pat[i], strlen(pat[i]), topics[k], strlen(topics[k])))
                want[nw++] = ids[i];
        qsort(want, nw, sizeof *want, cmp_u64);
        size_t u = 0;
        for (size_t i = 0; i < nw; i++)
            if (u == 0 || want[u - 1] != want[i])
                want[u++] = want[i];
        CHECK_EQ(n, (int64_t)u);
        CHECK(n >= 0 && memcmp(got, want, (size_t)n * sizeof *got) == 0);
        free(got);
    }
    cst_trie *snap = cst_snapshot(t, 1);
    block_job jobs[2] = {{t, 0, pat, 0}, {t, 1, pat, 0}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        CHECK_EQ(pthread_create(&th[k], NULL, block_unsubscribe_thread, &jobs[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    CHECK_EQ(jobs[0].removed + jobs[1].removed, BLOCK_PAIRS);
    CHECK_EQ(cst_len(t), 0);
    CHECK_EQ(cst_len(snap), BLOCK_PAIRS);
    CHECK_TRIE(t, 1);
    CHECK_TRIE(snap, 1);
    cst_free(snap);
    cst_free(t);
    cst_debug_set_block_threshold(16384);
    free(pat);
    free(data);
    free(off);
    free(ids);
    CHECK_NO_LEAK(start);
}

/* cst_build takes its offset table from files: every entry is checked against
 * the data's length before any pattern is read, and the first bad entry is
 * reported (CST_EBOUNDS).  The data lives in a block of exactly its size, so
 * ASan sees any read past it. */
static void build_bad_offsets(const char *text, size_t len, const int64_t *off, int64_t n,
                              int64_t want_bad)
{
    char *data = xcalloc(len ? len : 1, 1);
    memcpy(data, text, len);
    uint64_t ids[4] = {1, 1, 1, 1};
    uint8_t kept[4];
    int status = 12345;
    int64_t bad = -2;
    cst_trie *t = cst_build(&mqtt, data, len, off, ids, n, 1, kept, &status, &bad);
    CHECK(t == NULL);
    CHECK_EQ(status, CST_EBOUNDS);
    CHECK_EQ(bad, want_bad);
    if (t)
        cst_free(t);
    free(data);
}

void test_build_offsets(void)
{
    int64_t start = live_after_reclaim();
    /* up past the data and back down: refused at the rise, before pattern 0 is read */
    build_bad_offsets("a/ba/c", 6, (const int64_t[]){0, (int64_t)1 << 40, 6}, 2, 1);
    build_bad_offsets("a/ba/c", 6, (const int64_t[]){0, 7, 6}, 2, 1);
    build_bad_offsets("a/ba/c", 6, (const int64_t[]){-1, 3, 6}, 2, 0);
    build_bad_offsets("a/ba/c", 6, (const int64_t[]){0, 3, 2, 6}, 3, 2);
    build_bad_offsets("a/ba/c", 6, (const int64_t[]){0, 3, 7}, 2, 2);
    build_bad_offsets("a/ba/c", 6, (const int64_t[]){0, -3, 6}, 2, 1);
    build_bad_offsets("a/ba/c", 6, (const int64_t[]){0, 3, INT64_MIN}, 2, 2);
    build_bad_offsets("", 0, (const int64_t[]){1}, 0, 0);
    /* the whole table first: a bad offset at the end wins over pattern 0's bad UTF-8 */
    build_bad_offsets("\xff/ba/c", 6, (const int64_t[]){0, 3, 9}, 2, 2);
    int status;
    int64_t bad;
    uint64_t ids[2] = {1, 1};
    CHECK(cst_build(&mqtt, "a/b", 3, (const int64_t[]){0, 3}, ids, -1, 1, NULL, &status, &bad) ==
          NULL);
    CHECK_EQ(status, CST_EINVAL);
    CHECK_EQ(bad, -1);
    CHECK(cst_build(&mqtt, "\xff/ba/c", 6, (const int64_t[]){0, 3, 6}, ids, 2, 1, NULL, &status,
                    &bad) == NULL);
    CHECK_EQ(status, CST_EINVAL);
    CHECK_EQ(bad, 0);
    /* a good table that ends before the data does is fine (data_len is a bound) */
    cst_trie *t = cst_build(&mqtt, "a/ba/cXYZ", 9, (const int64_t[]){0, 3, 6}, ids, 2, 1, NULL,
                            &status, &bad);
    CHECK(t != NULL && status == CST_OK);
    if (t) {
        CHECK_EQ(cst_len(t), 2);
        cst_free(t);
    }
    t = cst_build(&mqtt, "", 0, (const int64_t[]){0}, ids, 0, 0, NULL, &status, &bad);
    CHECK(t != NULL && status == CST_OK);
    if (t)
        cst_free(t);
    CHECK_NO_LEAK(start);
}
