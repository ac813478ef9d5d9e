/*
 * test_engine.c - unit tests of the cstrie C engine (native/).
 *
 * Plain C, no framework: CHECK(expr) counts a pass or prints file:line and the
 * failing expression.  The program ends with the line "N passed, M failed" and
 * exits non-zero when M > 0.  Every test frees what it creates; the last test
 * proves that, after cst_reclaim(), the engine's live allocation count is back
 * to where it started.
 *
 * Tests that can hang on an engine bug (forced hash collisions) run in a forked
 * child guarded by a progress watchdog, so a livelock is reported as a failure
 * instead of stalling CI.
 *
 * Build: see stress/Makefile (gcc -std=c11 -D_GNU_SOURCE -I native ...).
 */
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cstrie.h"
#include "ebr.h"
#include "support.h"

/* ------------------------------------------------------------------------
 * Tiny harness
 * ---------------------------------------------------------------------- */

static long g_pass, g_fail;

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
static _Atomic long g_progress;
#define PROGRESS() atomic_fetch_add_explicit(&g_progress, 1, memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Dialects
 * ---------------------------------------------------------------------- */

static const cst_dialect amqp = {".", 1, "*", 1, "#", 1, /*multi_min*/ 0, /*multi_last_only*/ 0,
                                 /*strict*/ 0, /*topic_wildcards*/ 1, /*empty_topic*/ 1,
                                 /*empty_words*/ 1, /*dollar*/ 0, /*forbid_nul*/ 0,
                                 /*max_bytes*/ 0, /*forbidden*/ {0, 0}, /*max_levels*/ 0};
static const cst_dialect mqtt = {"/", 1, "+", 1, "#", 1, 0, 1, 1, 0, 0, 1, 1, 1, 65535, {0, 0}, 0};

/* ------------------------------------------------------------------------
 * Helpers over the engine
 * ---------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted lookup result; returns count or < 0.  *out is malloc'ed. */
static int64_t lookup_sorted(cst_trie *t, const char *topic, size_t len, uint64_t **out)
{
    size_t cap = 16;
    uint64_t *buf = xcalloc(cap, sizeof *buf);
    int64_t n;
    for (;;) {
        n = cst_lookup(t, topic, len, buf, cap);
        if (n < 0 || (size_t)n <= cap)
            break;
        cap = (size_t)n;
        buf = xrealloc(buf, cap * sizeof *buf);
    }
    if (n > 0)
        qsort(buf, (size_t)n, sizeof *buf, cmp_u64);
    *out = buf;
    return n;
}

static int sorted_has_dups(const uint64_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (v[i] == v[i - 1])
            return 1;
    return 0;
}

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

static void pairs_add(pairs *ps, const char *p, size_t plen, uint64_t id)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 64;
        ps->v = xrealloc(ps->v, ps->cap * sizeof *ps->v);
    }
    char *c = xcalloc(plen + 1, 1);
    memcpy(c, p, plen);
    ps->v[ps->n++] = (pair){c, plen, id};
}

static int pair_cmp(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    size_t m = x->plen < y->plen ? x->plen : y->plen;
    int c = memcmp(x->pat, y->pat, m);
    if (c)
        return c;
    if (x->plen != y->plen)
        return x->plen < y->plen ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void pairs_sort(pairs *ps)
{
    if (ps->n)
        qsort(ps->v, ps->n, sizeof *ps->v, pair_cmp);
}

static void pairs_free(pairs *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        free(ps->v[i].pat);
    free(ps->v);
    memset(ps, 0, sizeof *ps);
}

static int pairs_equal(const pairs *a, const pairs *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (pair_cmp(&a->v[i], &b->v[i]) != 0)
            return 0;
    return 1;
}

static int pairs_has_dups(const pairs *ps)
{
    for (size_t i = 1; i < ps->n; i++)
        if (pair_cmp(&ps->v[i], &ps->v[i - 1]) == 0)
            return 1;
    return 0;
}

/* Chunk buffers for cst_match / cst_iter_next. */
typedef struct cbuf {
    cst_chunk g;
} cbuf;

static void cbuf_init(cbuf *b, size_t pat_cap, size_t ids_cap, size_t entries_cap)
{
    memset(b, 0, sizeof *b);
    b->g.pat = xcalloc(pat_cap, 1);
    b->g.pat_cap = pat_cap;
    b->g.ids = xcalloc(ids_cap, sizeof(uint64_t));
    b->g.ids_cap = ids_cap;
    b->g.pat_end = xcalloc(entries_cap, sizeof(int64_t));
    b->g.ids_end = xcalloc(entries_cap, sizeof(int64_t));
    b->g.entries_cap = entries_cap;
}

static void cbuf_grow(cbuf *b, size_t pat_cap, size_t ids_cap, size_t entries_cap)
{
    if (pat_cap > b->g.pat_cap) {
        b->g.pat = xrealloc(b->g.pat, pat_cap);
        b->g.pat_cap = pat_cap;
    }
    if (ids_cap > b->g.ids_cap) {
        b->g.ids = xrealloc(b->g.ids, ids_cap * sizeof(uint64_t));
        b->g.ids_cap = ids_cap;
    }
    if (entries_cap > b->g.entries_cap) {
        b->g.pat_end = xrealloc(b->g.pat_end, entries_cap * sizeof(int64_t));
        b->g.ids_end = xrealloc(b->g.ids_end, entries_cap * sizeof(int64_t));
        b->g.entries_cap = entries_cap;
    }
}

static void cbuf_free(cbuf *b)
{
    free(b->g.pat);
    free(b->g.ids);
    free(b->g.pat_end);
    free(b->g.ids_end);
}

/* Append every (pattern, id) of the entries in g to ps; counts empty entries. */
static void chunk_to_pairs(const cst_chunk *g, size_t nentries, pairs *ps, long *empty_entries)
{
    int64_t p0 = 0, i0 = 0;
    for (size_t k = 0; k < nentries; k++) {
        int64_t p1 = g->pat_end[k], i1 = g->ids_end[k];
        if (i1 == i0 && empty_entries)
            (*empty_entries)++;
        for (int64_t i = i0; i < i1; i++)
            pairs_add(ps, g->pat + p0, (size_t)(p1 - p0), g->ids[i]);
        p0 = p1;
        i0 = i1;
    }
}

static long g_iter_empty_entries; /* partial entries with no ids (reported, not failed) */

/* Every (pattern, id) of t through cst_iter_*, with the given buffer sizes
 * (grown on CST_ETRUNC as the need_* fields ask), sorted. */
static pairs content_bufs(cst_trie *t, size_t pat_cap, size_t ids_cap, size_t entries_cap)
{
    pairs ps = {0};
    cst_iter *it = cst_iter_new(t);
    if (it == NULL) {
        ps.err = CST_ENOMEM;
        return ps;
    }
    cbuf b;
    cbuf_init(&b, pat_cap, ids_cap, entries_cap);
    for (;;) {
        int r = cst_iter_next(it, &b.g);
        if (r == CST_ETRUNC) {
            if (b.g.need_pat <= b.g.pat_cap && b.g.need_ids <= b.g.ids_cap &&
                b.g.need_entries <= b.g.entries_cap) {
                ps.err = -100; /* ETRUNC without a bigger need: would loop forever */
                break;
            }
            cbuf_grow(&b, b.g.need_pat, b.g.need_ids, b.g.need_entries);
            continue;
        }
        if (r < 0) {
            ps.err = r;
            break;
        }
        if (r == 0)
            break;
        ps.calls++;
        chunk_to_pairs(&b.g, (size_t)r, &ps, &g_iter_empty_entries);
    }
    cbuf_free(&b);
    cst_iter_free(it);
    pairs_sort(&ps);
    return ps;
}

static pairs content(cst_trie *t) { return content_bufs(t, 4096, 4096, 256); }

static int64_t live_after_reclaim(void)
{
    cst_reclaim();
    return cst_live_allocations();
}

/* Nothing leaked since `start` (the caller freed every trie it made). */
#define CHECK_NO_LEAK(start)                                   \
    do {                                                       \
        CHECK_EQ(cst_reclaim(), 0);                            \
        CHECK_EQ(cst_live_allocations(), (start));             \
    } while (0)

static int sub(cst_trie *t, const char *p, uint64_t id) { return cst_subscribe(t, p, strlen(p), id); }
static int unsub(cst_trie *t, const char *p, uint64_t id)
{
    return cst_unsubscribe(t, p, strlen(p), id);
}
/* Count-only queries pass a valid buffer with capacity 0 (NULL is covered by
 * test_count_only_null_buffer, which runs isolated). */
static uint64_t g_nobuf[1];
#define NOBUF g_nobuf, 0

static int64_t nlook(cst_trie *t, const char *topic)
{
    return cst_lookup(t, topic, strlen(topic), NOBUF);
}

/* Lookup of topic gives exactly the ids listed (terminated by UINT64_MAX). */
static int lookup_is(cst_trie *t, const char *topic, const uint64_t *want)
{
    uint64_t *got;
    int64_t n = lookup_sorted(t, topic, strlen(topic), &got);
    size_t wn = 0;
    while (want[wn] != UINT64_MAX)
        wn++;
    uint64_t *w = xcalloc(wn, sizeof *w);
    memcpy(w, want, wn * sizeof *w);
    qsort(w, wn, sizeof *w, cmp_u64);
    int ok = n == (int64_t)wn && (wn == 0 || memcmp(got, w, wn * sizeof *w) == 0);
    if (!ok) {
        fprintf(stderr, "  lookup(%s) = [", topic);
        for (int64_t i = 0; i < n; i++)
            fprintf(stderr, "%s%" PRIu64, i ? "," : "", got[i]);
        fprintf(stderr, "] (n=%" PRId64 "), want [", n);
        for (size_t i = 0; i < wn; i++)
            fprintf(stderr, "%s%" PRIu64, i ? "," : "", w[i]);
        fprintf(stderr, "]\n");
    }
    free(got);
    free(w);
    return ok;
}
#define END UINT64_MAX
#define LOOKUP_IS(t, topic, ...)                                   \
    do {                                                           \
        static const uint64_t want_[] = {__VA_ARGS__};             \
        CHECK(lookup_is((t), (topic), want_));                     \
    } while (0)

/* ------------------------------------------------------------------------
 * 1. subscribe / unsubscribe return values
 * ---------------------------------------------------------------------- */

static void test_subscribe_unsubscribe(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&amqp);
    CHECK(t != NULL);
    CHECK_EQ(cst_is_readonly(t), 0);
    CHECK_EQ(sub(t, "a.b", 1), 1);       /* new */
    CHECK_EQ(sub(t, "a.b", 1), 0);       /* existing */
    CHECK_EQ(sub(t, "a.b", 2), 1);       /* new id, same pattern: a set of 2 */
    CHECK_EQ(sub(t, "a.b", 3), 1);
    CHECK_EQ(sub(t, "a.b", 2), 0);
    CHECK_EQ(sub(t, "a", 1), 1);         /* prefix of an existing pattern */
    CHECK_EQ(sub(t, "a.b.c", 1), 1);     /* extension of an existing pattern */
    CHECK_EQ(sub(t, "", 9), 1);          /* the zero-word pattern */
    CHECK_EQ(sub(t, "", 9), 0);
    CHECK_EQ(sub(t, "a..b", 4), 1);      /* empty middle word */
    CHECK_EQ(sub(t, "a.*", 0), 1);       /* id 0 */
    CHECK_EQ(sub(t, "a.*", UINT64_MAX), 1);
    CHECK_EQ(sub(t, "#", 5), 1);
    CHECK_EQ(sub(t, "*", 5), 1);
    STRICT(t);
    CHECK_EQ(cst_len(t), 11);

    CHECK_EQ(unsub(t, "a.b", 7), 0);     /* absent id */
    CHECK_EQ(unsub(t, "x.y", 1), 0);     /* absent pattern */
    CHECK_EQ(unsub(t, "a.b.c.d", 1), 0); /* absent, below an existing pattern */
    CHECK_EQ(unsub(t, "a.c", 1), 0);
    CHECK_EQ(unsub(t, "a.b", 2), 1);
    CHECK_EQ(unsub(t, "a.b", 2), 0);
    CHECK_EQ(unsub(t, "a.b", 1), 1);
    CHECK_EQ(unsub(t, "a.b", 3), 1);     /* a.b now has no subscribers but a child */
    CHECK_EQ(unsub(t, "a.b", 3), 0);
    STRICT(t);
    CHECK_EQ(unsub(t, "a.b.c", 1), 1);   /* prunes a.b */
    STRICT(t);
    CHECK_EQ(unsub(t, "", 9), 1);
    CHECK_EQ(unsub(t, "", 9), 0);
    CHECK_EQ(unsub(t, "a..b", 4), 1);
    CHECK_EQ(unsub(t, "a.*", 0), 1);
    CHECK_EQ(unsub(t, "a.*", UINT64_MAX), 1);
    CHECK_EQ(unsub(t, "#", 5), 1);
    CHECK_EQ(unsub(t, "*", 5), 1);
    CHECK_EQ(cst_len(t), 1);
    CHECK_EQ(unsub(t, "a", 1), 1);
    CHECK_EQ(cst_len(t), 0);
    STRICT(t);

    /* Deep pattern: subscribe and remove leaves a clean, empty trie. */
    CHECK_EQ(sub(t, "a.b.c.d.e.f.g.h", 1), 1);
    CHECK_EQ(unsub(t, "a.b.c.d.e.f.g.h", 1), 1);
    STRICT(t);
    cst_stats st;
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK_EQ(st.pairs, 0);
    CHECK_EQ(st.patterns, 0);

    /* Invalid patterns in MQTT: the right codes, nothing changes. */
    cst_trie *m = cst_new(&mqtt);
    CHECK_EQ(cst_subscribe(m, S("a/#/b"), 1), CST_EMULTIPOS);
    CHECK_EQ(cst_subscribe(m, S("a/b#"), 1), CST_EWILDWORD);
    CHECK_EQ(cst_subscribe(m, S("a+/b"), 1), CST_EWILDWORD);
    CHECK_EQ(cst_subscribe(m, S(""), 1), CST_EEMPTY);
    CHECK_EQ(cst_subscribe(m, S("a/\0b"), 1), CST_ENUL);
    CHECK_EQ(cst_unsubscribe(m, S("a/#/b"), 1), CST_EMULTIPOS);
    CHECK_EQ(cst_unsubscribe(m, S(""), 1), CST_EEMPTY);
    char *longp = xcalloc(65537, 1);
    memset(longp, 'x', 65536);
    CHECK_EQ(cst_subscribe(m, longp, 65536, 1), CST_ETOOLONG);
    CHECK_EQ(cst_subscribe(m, longp, 65535, 1), 1);
    CHECK_EQ(cst_unsubscribe(m, longp, 65535, 1), 1);
    free(longp);
    CHECK_EQ(cst_subscribe(m, S("a/+/#"), 1), 1);
    CHECK_EQ(cst_subscribe(m, S("+"), 1), 1);
    CHECK_EQ(cst_subscribe(m, S("#"), 1), 1);
    CHECK_EQ(cst_subscribe(m, S("/"), 2), 1);
    CHECK_EQ(cst_len(m), 4);
    CHECK_EQ(cst_validate(m, S("a/+/#"), 1), 3);
    CHECK_EQ(cst_validate(m, S("a/+"), 0), CST_EWILDTOPIC);
    CHECK_EQ(cst_validate(m, S("/"), 0), 2);
    STRICT(m);
    CHECK_EQ(cst_new(NULL) == NULL, 1);
    cst_free(m);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* Forbidden bytes and the word limit (Dialect.forbidden / max_levels): NATS's
 * whitespace set and a 3-word limit, with the codes the binding turns into the
 * validator's messages; nothing changes on an error. */
static void test_forbidden_and_max_levels(void)
{
    int64_t start = live_after_reclaim();
    cst_dialect nats = {".", 1, "*", 1, ">", 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, {0, 0}, 0};
    for (const char *w = " \t\n\r\f"; *w; w++)
        nats.forbidden[(unsigned char)*w >> 6] |= UINT64_C(1) << ((unsigned char)*w & 63);
    cst_trie *n = cst_new(&nats);
    CHECK_EQ(cst_subscribe(n, S("a.>"), 1), 1);
    static const char *bad[] = {"a b", "a.\tb", "a.b\n", "\r", "\f.>", "a.b ", " "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t len = strlen(bad[i]);
        CHECK_EQ(cst_subscribe(n, bad[i], len, 2), CST_EFORBIDDEN);
        CHECK_EQ(cst_unsubscribe(n, bad[i], len, 1), CST_EFORBIDDEN);
        CHECK_EQ(cst_validate(n, bad[i], len, 0), CST_EFORBIDDEN);
        CHECK_EQ(cst_validate(n, bad[i], len, 1), CST_EFORBIDDEN);
    }
    uint64_t out[4];
    CHECK_EQ(cst_lookup(n, S("a.b c"), out, 4), CST_EFORBIDDEN);
    CHECK_EQ(cst_has_subscribers(n, S("a.\tb")), CST_EFORBIDDEN);
    /* The vertical tab, other controls and bytes >= 0x80 are ordinary. */
    CHECK_EQ(cst_validate(n, S("a.\vb.\x01\xc2\xa0"), 0), 3);
    CHECK_EQ(cst_lookup(n, S("a.\vb"), out, 4), 1);
    CHECK_EQ(cst_len(n), 1);
    STRICT(n);
    cst_free(n);

    cst_dialect lim = amqp;
    lim.max_levels = 3;
    cst_trie *t = cst_new(&lim);
    CHECK_EQ(cst_validate(t, S("a.b.c"), 1), 3);
    CHECK_EQ(cst_validate(t, S(".."), 0), 3);
    CHECK_EQ(cst_validate(t, S(""), 0), 0);
    CHECK_EQ(cst_validate(t, S("a.b.c.d"), 1), CST_ETOODEEP);
    CHECK_EQ(cst_validate(t, S("..."), 0), CST_ETOODEEP);
    CHECK_EQ(cst_subscribe(t, S("#.#.#"), 1), 1);
    CHECK_EQ(cst_subscribe(t, S("#.#.#.#"), 1), CST_ETOODEEP);
    CHECK_EQ(cst_unsubscribe(t, S("#.#.#.#"), 1), CST_ETOODEEP);
    CHECK_EQ(cst_lookup(t, S("x.y.z"), out, 4), 1);
    CHECK_EQ(cst_lookup(t, S("x.y.z.w"), out, 4), CST_ETOODEEP);
    CHECK_EQ(cst_has_subscribers(t, S("x.y.z.w")), CST_ETOODEEP);
    CHECK_EQ(cst_len(t), 1);
    STRICT(t);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 2. AMQP lookups against the reference matcher
 * ---------------------------------------------------------------------- */

static const char *amqp_patterns[] = {
    "#", "#.a", "a.#", "a.#.b", "#.#", "*", "*.*", "a.*", "a.*.c", "", "a", "a.b", "a.b.c",
    "*.#", "#.*", "a.#.#.b", "#.b.#", "a..b", "*.b", "a.*.#", "#.a.#", ".", "a.", ".a", "x.y",
    "*.*.*", "#.*.c", "a.#.c.#",
};
static const char *amqp_topics[] = {
    "", "a", "b", "a.b", "a.x.b", "a.x.y.b", "a.b.c", "a.x.c", "b.a", ".", "a.", ".a",
    "a..b", "x.y", "x.y.z", "a.b.b", "a.c.b.c", "c", "#", "*", "a.#", "b.b.b.b", "a.a.a",
};

static void test_amqp_lookup(void)
{
    int64_t start = live_after_reclaim();
    size_t np = sizeof amqp_patterns / sizeof *amqp_patterns;
    size_t nt = sizeof amqp_topics / sizeof *amqp_topics;
    cst_trie *t = cst_new(&amqp);
    for (size_t i = 0; i < np; i++)
        CHECK_EQ(sub(t, amqp_patterns[i], i + 100), 1);
    STRICT(t);
    for (size_t k = 0; k < nt; k++) {
        const char *top = amqp_topics[k];
        uint64_t want[64];
        size_t wn = 0;
        for (size_t i = 0; i < np; i++)
            if (ref_match(&amqp, amqp_patterns[i], strlen(amqp_patterns[i]), top, strlen(top)))
                want[wn++] = i + 100;
        want[wn] = END;
        if (!lookup_is(t, top, want)) {
            g_fail++;
            fprintf(stderr, "%s:%d: AMQP lookup of '%s' differs from the reference\n", __FILE__,
                    __LINE__, top);
        } else {
            g_pass++;
        }
        CHECK_EQ(cst_has_subscribers(t, top, strlen(top)), wn > 0);
    }
    /* One pattern per trie: lookup, has_subscribers and match agree with the
     * reference for every (pattern, topic). */
    cbuf b;
    cbuf_init(&b, 256, 16, 8);
    for (size_t i = 0; i < np; i++) {
        cst_trie *one = cst_new(&amqp);
        const char *p = amqp_patterns[i];
        CHECK_EQ(sub(one, p, 7), 1);
        for (size_t k = 0; k < nt; k++) {
            const char *top = amqp_topics[k];
            int want = ref_match(&amqp, p, strlen(p), top, strlen(top));
            uint64_t id = 0;
            int64_t n = cst_lookup(one, top, strlen(top), &id, 1);
            int h = cst_has_subscribers(one, top, strlen(top));
            int g = cst_match(one, top, strlen(top), &b.g);
            int ok = n == want && (!want || id == 7) && h == want && g == want &&
                     (!want || (b.g.pat_end[0] == (int64_t)strlen(p) &&
                                memcmp(b.g.pat, p, strlen(p)) == 0 && b.g.ids_end[0] == 1 &&
                                b.g.ids[0] == 7));
            if (ok) {
                g_pass++;
            } else {
                g_fail++;
                fprintf(stderr,
                        "%s:%d: AMQP pattern '%s' topic '%s': want %d, lookup %" PRId64
                        " has %d match %d\n",
                        __FILE__, __LINE__, p, top, want, n, h, g);
            }
        }
        cst_free(one);
    }
    cbuf_free(&b);

    /* The rules named in the brief, spelled out. */
    cst_trie *r = cst_new(&amqp);
    sub(r, "#.x", 1);      /* # zero words at the start */
    sub(r, "x.#.y", 2);    /* # zero words in the middle */
    sub(r, "x.#", 3);      /* # zero words at the end */
    sub(r, "*", 4);        /* exactly one word */
    sub(r, "", 5);         /* the zero-word pattern */
    sub(r, "#", 6);
    LOOKUP_IS(r, "x", 1, 3, 4, 6, END);
    LOOKUP_IS(r, "x.y", 2, 3, 6, END);
    LOOKUP_IS(r, "q.x", 1, 6, END);
    LOOKUP_IS(r, "x.q.q.y", 2, 3, 6, END);
    LOOKUP_IS(r, "", 5, 6, END);        /* empty topic = zero words: "" and "#" */
    LOOKUP_IS(r, ".", 6, END);           /* two empty words */
    LOOKUP_IS(r, "y", 4, 6, END);
    CHECK_EQ(cst_validate(r, S(""), 0), 0);
    CHECK_EQ(cst_validate(r, S("."), 0), 2);
    CHECK_EQ(cst_validate(r, S("a.*.#"), 1), 3);
    STRICT(r);
    cst_free(r);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 3. MQTT lookups, the $ rule and invalid topics
 * ---------------------------------------------------------------------- */

static const char *mqtt_patterns[] = {
    "#", "+", "+/+", "a/#", "a/+", "$SYS/#", "$SYS/+", "+/b", "/", "a//b", "+/#", "a/b",
    "a", "a/+/#", "+/+/#", "$SYS", "/#", "+/", "a/b/#", "$x/b", "b/$x", "b/+",
};
static const char *mqtt_topics[] = {
    "a", "a/b", "$SYS/x", "$SYS", "a/", "/", "a//b", "$x/b", "b/$x", "a/b/c", "b", "//",
    "$SYS/x/y", "x$/b", "a/$b", "$", "$/a",
};

static void test_mqtt_lookup(void)
{
    int64_t start = live_after_reclaim();
    size_t np = sizeof mqtt_patterns / sizeof *mqtt_patterns;
    size_t nt = sizeof mqtt_topics / sizeof *mqtt_topics;
    cst_trie *t = cst_new(&mqtt);
    for (size_t i = 0; i < np; i++)
        CHECK_EQ(sub(t, mqtt_patterns[i], i + 100), 1);
    STRICT(t);
    for (size_t k = 0; k < nt; k++) {
        const char *top = mqtt_topics[k];
        uint64_t want[64];
        size_t wn = 0;
        for (size_t i = 0; i < np; i++)
            if (ref_match(&mqtt, mqtt_patterns[i], strlen(mqtt_patterns[i]), top, strlen(top)))
                want[wn++] = i + 100;
        want[wn] = END;
        if (!lookup_is(t, top, want)) {
            g_fail++;
            fprintf(stderr, "%s:%d: MQTT lookup of '%s' differs from the reference\n", __FILE__,
                    __LINE__, top);
        } else {
            g_pass++;
        }
        CHECK_EQ(cst_has_subscribers(t, top, strlen(top)), wn > 0);
    }
    /* Spelled out: the $ rule and '#' matching the parent. */
    cst_trie *r = cst_new(&mqtt);
    sub(r, "#", 1);
    sub(r, "+/x", 2);
    sub(r, "$SYS/#", 3);
    sub(r, "a/#", 4);
    sub(r, "+", 5);
    sub(r, "a/+", 6);
    LOOKUP_IS(r, "$SYS/x", 3, END);      /* wildcard-first filters never see $ topics */
    LOOKUP_IS(r, "$SYS", 3, END);        /* "$SYS/#" matches its parent */
    LOOKUP_IS(r, "a", 1, 4, 5, END);     /* "a/#" matches "a"; "a/+" does not */
    LOOKUP_IS(r, "a/x", 1, 2, 4, 6, END);
    LOOKUP_IS(r, "a/", 1, 4, 6, END);    /* "+" matches an empty level */
    LOOKUP_IS(r, "b/$x", 1, END);        /* only the first level matters for $ */
    CHECK_EQ(cst_has_subscribers(r, S("$other")), 0);
    CHECK_EQ(cst_has_subscribers(r, S("other")), 1);

    /* Invalid topics: the right code from every reader. */
    struct {
        const char *s;
        size_t len;
        int code;
    } bad[] = {
        {"", 0, CST_EEMPTY},        {"a/+", 3, CST_EWILDTOPIC}, {"a/#", 3, CST_EWILDTOPIC},
        {"+", 1, CST_EWILDTOPIC},   {"a+b", 3, CST_EWILDTOPIC}, {"a/b#", 4, CST_EWILDTOPIC},
        {"a\0b", 3, CST_ENUL},
    };
    cbuf b;
    cbuf_init(&b, 64, 8, 4);
    uint64_t out[4];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ(cst_lookup(r, bad[i].s, bad[i].len, out, 4), bad[i].code);
        CHECK_EQ(cst_has_subscribers(r, bad[i].s, bad[i].len), bad[i].code);
        CHECK_EQ(cst_match(r, bad[i].s, bad[i].len, &b.g), bad[i].code);
        CHECK_EQ(cst_validate(r, bad[i].s, bad[i].len, 0), bad[i].code);
    }
    char *big = xcalloc(65537, 1);
    memset(big, 'a', 65536);
    CHECK_EQ(cst_lookup(r, big, 65536, out, 4), CST_ETOOLONG);
    CHECK_EQ(cst_lookup(r, big, 65535, out, 4), 2); /* "#" and "+" */
    free(big);
    cbuf_free(&b);
    STRICT(r);
    cst_free(r);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 4. has_subscribers
 * ---------------------------------------------------------------------- */

static void test_has_subscribers(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&amqp);
    CHECK_EQ(cst_has_subscribers(t, S("a")), 0);
    CHECK_EQ(cst_has_subscribers(t, S("")), 0);
    sub(t, "a.*.c", 1);
    CHECK_EQ(cst_has_subscribers(t, S("a.b.c")), 1);
    CHECK_EQ(cst_has_subscribers(t, S("a.b")), 0);
    CHECK_EQ(cst_has_subscribers(t, S("a.b.c.d")), 0);
    sub(t, "#.d", 2);
    CHECK_EQ(cst_has_subscribers(t, S("a.b.c.d")), 1);
    CHECK_EQ(cst_has_subscribers(t, S("d")), 1);
    CHECK_EQ(cst_has_subscribers(t, S("")), 0);
    sub(t, "", 3);
    CHECK_EQ(cst_has_subscribers(t, S("")), 1);
    unsub(t, "a.*.c", 1);
    CHECK_EQ(cst_has_subscribers(t, S("a.b.c")), 0);
    /* Readers work on a read-only snapshot too. */
    cst_trie *s = cst_snapshot(t, 1);
    CHECK_EQ(cst_has_subscribers(s, S("x.d")), 1);
    cst_stats st;
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK(st.lookups >= 8);
    CHECK_EQ(st.pairs, 2);
    STRICT(t);
    STRICT(s);
    cst_free(s);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 5. cst_match entries and truncation
 * ---------------------------------------------------------------------- */

static void test_match_chunk(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&amqp);
    sub(t, "a.b.c", 1);
    sub(t, "a.*.c", 2);
    sub(t, "a.*.c", 3);
    sub(t, "#", 4);
    sub(t, "#.c", 5);
    sub(t, "#.c", 6);
    sub(t, "#.c", 1); /* id 1 in two entries: match reports it in both */
    sub(t, "x.y", 9);

    /* Expected entries for "a.b.c" (order unspecified). */
    pairs want = {0};
    pairs_add(&want, S("a.b.c"), 1);
    pairs_add(&want, S("a.*.c"), 2);
    pairs_add(&want, S("a.*.c"), 3);
    pairs_add(&want, S("#"), 4);
    pairs_add(&want, S("#.c"), 5);
    pairs_add(&want, S("#.c"), 6);
    pairs_add(&want, S("#.c"), 1);
    pairs_sort(&want);

    cbuf b;
    cbuf_init(&b, 1, 1, 1);
    int r = cst_match(t, S("a.b.c"), &b.g);
    CHECK_EQ(r, CST_ETRUNC);
    CHECK_EQ(b.g.need_entries, 4);
    CHECK_EQ(b.g.need_ids, 7);
    CHECK_EQ(b.g.need_pat, strlen("a.b.c") + strlen("a.*.c") + strlen("#") + strlen("#.c"));
    /* Only the pattern buffer too small. */
    cbuf_grow(&b, 4, 64, 64);
    CHECK_EQ(cst_match(t, S("a.b.c"), &b.g), CST_ETRUNC);
    CHECK_EQ(b.g.need_pat, 14);
    cbuf_grow(&b, b.g.need_pat, b.g.need_ids, b.g.need_entries);
    r = cst_match(t, S("a.b.c"), &b.g);
    CHECK_EQ(r, 4);
    CHECK_EQ(b.g.nentries, 4);
    pairs got = {0};
    chunk_to_pairs(&b.g, (size_t)(r > 0 ? r : 0), &got, NULL);
    pairs_sort(&got);
    CHECK(pairs_equal(&got, &want));
    /* Exactly-sized buffers succeed as well. */
    cbuf c;
    cbuf_init(&c, 14, 7, 4);
    CHECK_EQ(cst_match(t, S("a.b.c"), &c.g), 4);
    /* No matches: zero entries, even with empty buffers. */
    cbuf z;
    cbuf_init(&z, 0, 0, 0);
    CHECK_EQ(cst_match(t, S(""), &z.g), CST_ETRUNC); /* "#" matches; no room */
    CHECK_EQ(z.g.need_entries, 1);
    CHECK_EQ(z.g.need_pat, 1);
    CHECK_EQ(z.g.need_ids, 1);
    CHECK_EQ(cst_match(t, S("q.q"), &z.g), CST_ETRUNC);
    unsub(t, "#", 4);
    CHECK_EQ(cst_match(t, S("q.q"), &z.g), 0);
    CHECK_EQ(z.g.need_entries, 0);
    pairs_free(&got);
    pairs_free(&want);
    cbuf_free(&b);
    cbuf_free(&c);
    cbuf_free(&z);
    STRICT(t);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 6. cst_subscribers (exact pattern)
 * ---------------------------------------------------------------------- */

static void test_subscribers(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&amqp);
    for (uint64_t i = 0; i < 1000; i++)
        sub(t, "a.*", i * 3);
    sub(t, "a.b", 5000);
    sub(t, "", 6000);
    sub(t, "#", 7000);
    uint64_t *out = xcalloc(1000, sizeof *out);
    CHECK_EQ(cst_subscribers(t, S("a.*"), out, 1000), 1000);
    qsort(out, 1000, sizeof *out, cmp_u64);
    int ok = 1;
    for (uint64_t i = 0; i < 1000; i++)
        ok &= out[i] == i * 3;
    CHECK(ok);
    memset(out, 0xff, 1000 * sizeof *out);
    CHECK_EQ(cst_subscribers(t, S("a.*"), out, 10), 1000); /* count; 10 written */
    ok = 1;
    for (int i = 0; i < 10; i++)
        ok &= out[i] % 3 == 0 && out[i] < 3000;
    CHECK(ok);
    CHECK_EQ(out[10], UINT64_MAX);
    CHECK_EQ(cst_subscribers(t, S("a.b"), out, 1000), 1);
    CHECK_EQ(out[0], 5000);
    CHECK_EQ(cst_subscribers(t, S("a.c"), out, 1000), 0);   /* exact, not matching */
    CHECK_EQ(cst_subscribers(t, S("a"), out, 1000), 0);     /* inner node, no subscribers */
    CHECK_EQ(cst_subscribers(t, S("a.b.c"), out, 1000), 0);
    CHECK_EQ(cst_subscribers(t, S(""), out, 1000), 1);
    CHECK_EQ(out[0], 6000);
    CHECK_EQ(cst_subscribers(t, S("#"), out, 1000), 1);
    CHECK_EQ(out[0], 7000);
    CHECK_EQ(cst_subscribers(t, S("a.*"), NOBUF), 1000);
    cst_trie *m = cst_new(&mqtt);
    CHECK_EQ(cst_subscribers(m, S("a/#/b"), out, 10), CST_EMULTIPOS);
    CHECK_EQ(cst_subscribers(m, S(""), out, 10), CST_EEMPTY);
    cst_free(m);
    free(out);
    STRICT(t);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 7. cst_lookup_batch
 * ---------------------------------------------------------------------- */

typedef struct batch_pair {
    int64_t row;
    uint64_t id;
} batch_pair;

static int bp_cmp(const void *a, const void *b)
{
    const batch_pair *x = a, *y = b;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Run a whole batch through cst_lookup_batch starting with capacity cap
 * (grown when a row alone needs more: CST_ETRUNC); returns the sorted (row,
 * id) pairs and fills status.  Checks the protocol on the way, and that on a
 * writable trie every row comes whole from one call (never split between two
 * walks); a read-only trie may split a row (resuming with skip). */
static batch_pair *run_batch(cst_trie *t, const char *data, const void *offs, int off64,
                             const uint8_t *valid, int64_t voff, int64_t nrows, size_t cap,
                             int8_t *status, size_t *npairs, long *ncalls)
{
    size_t n = 0, ncap = 64;
    batch_pair *res = xcalloc(ncap, sizeof *res);
    int64_t *rows = xcalloc(cap, sizeof *rows);
    uint64_t *ids = xcalloc(cap, sizeof *ids);
    long *row_call = xcalloc((size_t)nrows, sizeof *row_call);
    int64_t row = 0;
    uint64_t skip = 0;
    long calls = 0;
    int frozen = cst_is_readonly(t);
    while (row < nrows) {
        int64_t next_row = -1;
        uint64_t next_skip = 99;
        size_t need = 0;
        int64_t got = cst_lookup_batch(t, data, offs, off64, valid, voff, nrows, row, skip, rows,
                                       ids, cap, &next_row, &next_skip, &need, status);
        calls++;
        if (got == CST_ETRUNC && next_row >= row && next_row < nrows && need > cap &&
            calls < 100000) {
            row = next_row; /* rows before it were null, invalid or matched nothing */
            cap = need;     /* the row alone is bigger than the buffer: grow, ask again */
            rows = xrealloc(rows, cap * sizeof *rows);
            ids = xrealloc(ids, cap * sizeof *ids);
            continue;
        }
        if (got < 0 || (size_t)got > cap || next_row < row || next_row > nrows ||
            (next_row == row && next_skip <= skip && got == 0) || (next_skip && !frozen) ||
            calls > 100000) {
            g_fail++;
            fprintf(stderr,
                    "%s:%d: lookup_batch protocol: got %" PRId64 " row %" PRId64 "->%" PRId64
                    " need %zu cap %zu\n",
                    __FILE__, __LINE__, got, row, next_row, need, cap);
            break;
        }
        for (int64_t i = 0; i < got; i++) {
            if (n == ncap) {
                ncap *= 2;
                res = xrealloc(res, ncap * sizeof *res);
            }
            res[n++] = (batch_pair){rows[i], ids[i]};
            if (rows[i] < row || rows[i] > next_row || (rows[i] == next_row && !next_skip)) {
                g_fail++;
                fprintf(stderr, "%s:%d: lookup_batch row %" PRId64 " outside [%" PRId64
                                ", %" PRId64 "]\n", __FILE__, __LINE__, rows[i], row, next_row);
            } else if (!frozen && row_call[rows[i]] != 0 && row_call[rows[i]] != calls) {
                g_fail++;
                fprintf(stderr, "%s:%d: lookup_batch row %" PRId64 " split across calls\n",
                        __FILE__, __LINE__, rows[i]);
            } else {
                row_call[rows[i]] = calls;
            }
        }
        row = next_row;
        skip = next_skip;
    }
    free(rows);
    free(ids);
    free(row_call);
    if (n)
        qsort(res, n, sizeof *res, bp_cmp);
    *npairs = n;
    *ncalls = calls;
    return res;
}

static void test_lookup_batch(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&mqtt);
    /* "big/x" matches 40 ids through "big/#" and "big/+" and "#". */
    for (uint64_t i = 0; i < 20; i++) {
        sub(t, "big/#", 1000 + i);
        sub(t, "big/+", 2000 + i);
    }
    sub(t, "big/+", 1000); /* duplicate across patterns: delivered once */
    sub(t, "#", 7);
    sub(t, "a/b", 1);
    sub(t, "a/+", 2);
    sub(t, "+/b", 3);
    sub(t, "$SYS/#", 4);

    const char *topics[] = {"a/b", NULL, "big/x", "", "a/+", "$SYS/q", NULL, "a/c",
                            "zzz", "big/x", "a/b", NULL};
    int64_t nrows = (int64_t)(sizeof topics / sizeof *topics);
    /* Arrow layout: data, offsets (32 and 64 bit), validity with a bit offset of 3. */
    char data[256];
    int32_t off32[16];
    int64_t off64[16];
    uint8_t valid[4] = {0, 0, 0, 0};
    const int64_t voff = 3;
    size_t pos = 0;
    for (int64_t r = 0; r < nrows; r++) {
        off32[r] = (int32_t)pos;
        off64[r] = (int64_t)pos;
        if (topics[r]) {
            memcpy(data + pos, topics[r], strlen(topics[r]));
            pos += strlen(topics[r]);
            valid[(r + voff) >> 3] |= (uint8_t)(1u << ((r + voff) & 7));
        }
    }
    off32[nrows] = (int32_t)pos;
    off64[nrows] = (int64_t)pos;
    /* Junk in the bits before the offset must be ignored. */
    valid[0] |= 0x5;

    /* Expected pairs from per-row lookups. */
    size_t en = 0;
    batch_pair expect[512];
    for (int64_t r = 0; r < nrows; r++) {
        if (!topics[r])
            continue;
        uint64_t *ids;
        int64_t n = lookup_sorted(t, topics[r], strlen(topics[r]), &ids);
        for (int64_t i = 0; i < n; i++)
            expect[en++] = (batch_pair){r, ids[i]};
        free(ids);
    }
    qsort(expect, en, sizeof *expect, bp_cmp);
    CHECK(en > 90);

    size_t caps[] = {1000, 3, 1, 40, 41, 7};
    for (int use64 = 0; use64 < 2; use64++) {
        for (size_t ci = 0; ci < sizeof caps / sizeof *caps; ci++) {
            int8_t status[16];
            memset(status, 99, sizeof status);
            size_t n;
            long calls;
            batch_pair *got =
                run_batch(t, data, use64 ? (const void *)off64 : (const void *)off32, use64,
                          valid, voff, nrows, caps[ci], status, &n, &calls);
            int same = n == en && memcmp(got, expect, n * sizeof *got) == 0;
            if (!same)
                fprintf(stderr, "  batch cap=%zu off64=%d: %zu pairs, want %zu\n", caps[ci],
                        use64, n, en);
            CHECK(same);
            /* Each (row, id) once. */
            int dup = 0;
            for (size_t i = 1; i < n; i++)
                dup |= bp_cmp(&got[i], &got[i - 1]) == 0;
            CHECK(!dup);
            if (caps[ci] < 40)
                CHECK(calls > 1);
            CHECK_EQ(status[0], 0);
            CHECK_EQ(status[1], 1);              /* null */
            CHECK_EQ(status[2], 0);
            CHECK_EQ(status[3], CST_EEMPTY);     /* invalid rows: their code */
            CHECK_EQ(status[4], CST_EWILDTOPIC);
            CHECK_EQ(status[5], 0);
            CHECK_EQ(status[6], 1);
            CHECK_EQ(status[11], 1);
            free(got);
        }
    }
    /* Without validity and status, starting in the middle. */
    int64_t rows[64];
    uint64_t ids[64];
    int64_t next_row;
    size_t need = 99;
    const char d2[] = "a/bzzz";
    int32_t o2[] = {0, 3, 6};
    uint64_t next_skip = 99;
    int64_t got = cst_lookup_batch(t, d2, o2, 0, NULL, 0, 2, 1, 0, rows, ids, 64, &next_row,
                                   &next_skip, &need, NULL);
    CHECK_EQ(got, 1); /* only "zzz" -> "#" */
    CHECK_EQ(rows[0], 1);
    CHECK_EQ(ids[0], 7);
    CHECK_EQ(next_row, 2);
    CHECK_EQ(next_skip, 0);
    CHECK_EQ(need, 0);
    /* A row bigger than the whole buffer: CST_ETRUNC, nothing written, and
     * the size it needs ("big/x" matches 41 distinct ids). */
    const char d3[] = "big/x";
    int32_t o3[] = {0, 5};
    got = cst_lookup_batch(t, d3, o3, 0, NULL, 0, 1, 0, 5, rows, ids, 10, &next_row, &next_skip,
                           &need, NULL);
    CHECK_EQ(got, CST_ETRUNC); /* a skip on a writable trie is ignored */
    CHECK_EQ(next_row, 0);
    CHECK_EQ(need, 41);
    /* A frozen snapshot splits the row instead, in a stable order. */
    cst_trie *s = cst_snapshot(t, 1);
    int8_t status[16];
    size_t n;
    long calls;
    batch_pair *g2 = run_batch(s, data, off64, 1, valid, voff, nrows, 2, status, &n, &calls);
    CHECK(n == en && memcmp(g2, expect, n * sizeof *g2) == 0);
    free(g2);
    cst_free(s);
    STRICT(t);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 8. Snapshots and copies
 * ---------------------------------------------------------------------- */

static void fill_small(cst_trie *t, uint64_t base)
{
    const char *ps[] = {"a.b.c", "a.*", "#", "x.y.z.w", "a", "", "q.#.r", "m.n"};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        sub(t, ps[i], base + i);
        sub(t, ps[i], base + 100 + i);
    }
}

static void test_snapshots(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&amqp);
    fill_small(t, 0);
    pairs before = content(t);
    CHECK_EQ(before.n, 16);

    cst_trie *ro = cst_snapshot(t, 1);
    CHECK(ro != NULL);
    CHECK_EQ(cst_is_readonly(ro), 1);
    /* Later writes to t do not show in ro. */
    CHECK_EQ(sub(t, "a.b.c", 77), 1);
    CHECK_EQ(unsub(t, "x.y.z.w", 3), 1);
    CHECK_EQ(unsub(t, "x.y.z.w", 103), 1);
    CHECK_EQ(sub(t, "new.path.here", 1), 1);
    CHECK_EQ(cst_clear(t), 0);
    CHECK_EQ(sub(t, "after.clear", 1), 1);
    pairs ro_now = content(ro);
    CHECK(pairs_equal(&ro_now, &before));
    CHECK_EQ(cst_len(ro), 16);
    CHECK_EQ(cst_len(t), 1);
    LOOKUP_IS(ro, "x.y.z.w", 2, 3, 102, 103, END);
    LOOKUP_IS(t, "x.y.z.w", END);
    STRICT(ro);
    STRICT(t);

    /* A read-only snapshot refuses writes. */
    CHECK_EQ(sub(ro, "a", 1), CST_EREADONLY);
    CHECK_EQ(unsub(ro, "a", 4), CST_EREADONLY);
    CHECK_EQ(cst_clear(ro), CST_EREADONLY);
    CHECK(cst_clear_take(ro) == NULL);
    CHECK_EQ(cst_len(ro), 16);

    /* Snapshot of a snapshot: read-only shares; a writable copy is free. */
    cst_trie *ro2 = cst_snapshot(ro, 1);
    cst_trie *cp = cst_snapshot(ro, 0);
    CHECK(ro2 != NULL && cp != NULL);
    CHECK_EQ(cst_is_readonly(ro2), 1);
    CHECK_EQ(cst_is_readonly(cp), 0);
    pairs p2 = content(ro2), p3 = content(cp);
    CHECK(pairs_equal(&p2, &before));
    CHECK(pairs_equal(&p3, &before));
    CHECK_EQ(sub(cp, "copy.only", 5), 1);
    CHECK_EQ(unsub(cp, "a.*", 1), 1);
    CHECK_EQ(cst_clear(cp) == 0 && sub(cp, "z", 1) == 1, 1);
    CHECK_EQ(cst_len(cp), 1);
    CHECK_EQ(cst_len(ro), 16);
    CHECK_EQ(cst_len(ro2), 16);
    STRICT(cp);
    STRICT(ro2);

    /* A writable copy of a live trie is independent both ways. */
    cst_trie *u = cst_new(&amqp);
    fill_small(u, 0);
    cst_trie *w = cst_snapshot(u, 0);
    CHECK(w != NULL);
    CHECK_EQ(cst_is_readonly(w), 0);
    CHECK_EQ(sub(w, "only.in.copy", 1), 1);
    CHECK_EQ(unsub(w, "a.b.c", 0), 1);
    CHECK_EQ(sub(u, "only.in.orig", 1), 1);
    CHECK_EQ(unsub(u, "m.n", 7), 1);
    LOOKUP_IS(w, "only.in.copy", 1, 2, 102, END);   /* 2, 102: "#" */
    LOOKUP_IS(u, "only.in.copy", 2, 102, END);
    LOOKUP_IS(u, "only.in.orig", 1, 2, 102, END);
    LOOKUP_IS(w, "only.in.orig", 2, 102, END);
    LOOKUP_IS(w, "a.b.c", 2, 100, 102, END);
    LOOKUP_IS(u, "a.b.c", 0, 2, 100, 102, END);
    LOOKUP_IS(w, "m.n", 2, 7, 102, 107, END);
    LOOKUP_IS(u, "m.n", 2, 102, 107, END);
    CHECK_EQ(cst_len(u), 16);
    CHECK_EQ(cst_len(w), 16);
    /* Copy of a copy, snapshot of a copy. */
    cst_trie *w2 = cst_snapshot(w, 0);
    cst_trie *wr = cst_snapshot(w, 1);
    CHECK_EQ(sub(w2, "w2", 1), 1);
    CHECK_EQ(sub(w, "w", 1), 1);
    CHECK_EQ(cst_len(w2), 17);
    CHECK_EQ(cst_len(w), 17);
    CHECK_EQ(cst_len(wr), 16);
    CHECK_EQ(cst_has_subscribers(w2, S("w")), 1); /* "#" */
    CHECK_EQ(cst_subscribers(w2, S("w"), NOBUF), 0);
    CHECK_EQ(cst_subscribers(w, S("w"), NOBUF), 1);
    CHECK_EQ(cst_subscribers(w2, S("w2"), NOBUF), 1);
    STRICT(u);
    STRICT(w);
    STRICT(w2);
    STRICT(wr);

    /* Free the original first: snapshots keep their nodes. */
    cst_free(t);
    cst_free(u);
    cst_reclaim();
    pairs p4 = content(ro);
    CHECK(pairs_equal(&p4, &before));
    STRICT(ro);
    cst_free(ro);
    cst_free(ro2);
    cst_free(cp);
    cst_free(w);
    cst_free(w2);
    cst_free(wr);
    pairs_free(&before);
    pairs_free(&ro_now);
    pairs_free(&p2);
    pairs_free(&p3);
    pairs_free(&p4);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 9. clear and clear_take
 * ---------------------------------------------------------------------- */

static void test_clear(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&amqp);
    CHECK_EQ(cst_clear(t), 0); /* empty */
    fill_small(t, 0);
    CHECK_EQ(cst_clear(t), 0);
    CHECK_EQ(cst_len(t), 0);
    LOOKUP_IS(t, "a.b.c", END);
    STRICT(t);
    pairs empty = content(t);
    CHECK_EQ(empty.n, 0);

    fill_small(t, 10);
    pairs before = content(t);
    cst_trie *taken = cst_clear_take(t);
    CHECK(taken != NULL);
    if (taken) {
        CHECK_EQ(cst_is_readonly(taken), 1);
        pairs got = content(taken);
        CHECK(pairs_equal(&got, &before));
        CHECK_EQ(cst_len(taken), (int64_t)before.n);
        STRICT(taken);
        pairs_free(&got);
    }
    CHECK_EQ(cst_len(t), 0);
    /* The trie is usable, and the taken snapshot unaffected. */
    CHECK_EQ(sub(t, "a.b.c", 10), 1);
    CHECK_EQ(sub(t, "fresh", 1), 1);
    CHECK_EQ(cst_len(t), 2);
    if (taken) {
        CHECK_EQ(cst_len(taken), (int64_t)before.n);
        CHECK_EQ(cst_subscribers(taken, S("fresh"), NOBUF), 0);
    }
    /* clear_take of an empty trie: an empty snapshot. */
    cst_trie *e = cst_new(&amqp);
    cst_trie *te = cst_clear_take(e);
    CHECK(te != NULL);
    if (te)
        CHECK_EQ(cst_len(te), 0);
    STRICT(t);
    cst_free(te);
    cst_free(e);
    cst_free(taken);
    cst_free(t);
    pairs_free(&before);
    pairs_free(&empty);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 10. cst_len and iteration against a model, with small buffers
 * ---------------------------------------------------------------------- */

static void random_pattern(uint64_t *rng, char *buf, size_t cap, int wild)
{
    static const char *words[] = {"a", "b", "c", "dd", "eee", "", "f", "gg"};
    int n = (int)(rng_next(rng) % 5); /* 0 words = the zero-word pattern */
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *w;
        uint64_t r = rng_next(rng) % 12;
        if (wild && r == 10)
            w = "*";
        else if (wild && r == 11)
            w = "#";
        else
            w = words[r % 8];
        int l = snprintf(buf + len, cap - len, "%s%s", i ? "." : "", w);
        if (l < 0 || (size_t)l >= cap - len) {
            buf[len] = 0;
            break;
        }
        len += (size_t)l;
    }
}

static void test_len_and_iteration(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&amqp);
    /* Model: a hash set of (pattern, id) through a sorted pairs rebuild. */
    enum { NPAT = 300, NIDS = 6 };
    char pats[NPAT][48];
    uint64_t rng = 12345;
    for (int i = 0; i < NPAT; i++)
        random_pattern(&rng, pats[i], sizeof pats[i], 1);
    unsigned char *model = xcalloc(NPAT * NIDS, 1);
    int64_t counter = 0;
    for (int step = 0; step < 20000; step++) {
        int p = (int)(rng_next(&rng) % NPAT), id = (int)(rng_next(&rng) % NIDS);
        int ins = rng_next(&rng) % 3 != 0;
        /* Same pattern text may be drawn twice: the model is keyed by text. */
        int k = p;
        for (int q = 0; q < p; q++)
            if (strcmp(pats[q], pats[p]) == 0) {
                k = q;
                break;
            }
        int r = ins ? sub(t, pats[k], (uint64_t)id) : unsub(t, pats[k], (uint64_t)id);
        unsigned char *m = &model[k * NIDS + id];
        int want = ins ? !*m : *m;
        if (r != want) {
            g_fail++;
            fprintf(stderr, "%s:%d: %s('%s', %d) = %d, model says %d\n", __FILE__, __LINE__,
                    ins ? "subscribe" : "unsubscribe", pats[k], id, r, want);
        }
        if (r == 1) {
            *m = (unsigned char)ins;
            counter += ins ? 1 : -1;
        }
        if (step % 2000 == 0) {
            CHECK_EQ(cst_len(t), counter);
            STRICT(t);
        }
    }
    CHECK_EQ(cst_len(t), counter);
    STRICT(t);
    pairs want = {0};
    for (int i = 0; i < NPAT; i++)
        for (int id = 0; id < NIDS; id++)
            if (model[i * NIDS + id])
                pairs_add(&want, pats[i], strlen(pats[i]), (uint64_t)id);
    pairs_sort(&want);
    CHECK_EQ(want.n, counter);
    /* Iteration with many buffer shapes, growing on CST_ETRUNC. */
    size_t shapes[][3] = {{4096, 4096, 256}, {1, 1, 1}, {0, 0, 0}, {16, 2, 1},
                          {64, 3, 5},        {8, 100, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        pairs got = content_bufs(t, shapes[s][0], shapes[s][1], shapes[s][2]);
        CHECK_EQ(got.err, 0);
        CHECK(!pairs_has_dups(&got));
        CHECK(pairs_equal(&got, &want));
        pairs_free(&got);
    }
    /* Stats agree with len. */
    cst_stats st;
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK_EQ(st.pairs, counter);
    /* The dump works and reports its full length. */
    size_t dl = cst_dump(t, NULL, 0);
    char *dump = xcalloc(dl + 1, 1);
    CHECK_EQ(cst_dump(t, dump, dl + 1), dl);
    CHECK(strncmp(dump, "I gen=", 6) == 0);
    free(dump);
    /* An iterator sees the trie as of its creation. */
    cst_iter *it = cst_iter_new(t);
    CHECK_EQ(cst_clear(t), 0);
    cbuf b;
    cbuf_init(&b, 4096, 4096, 256);
    pairs got = {0};
    int r;
    while ((r = cst_iter_next(it, &b.g)) > 0)
        chunk_to_pairs(&b.g, (size_t)r, &got, NULL);
    CHECK_EQ(r, 0);
    CHECK_EQ(cst_iter_next(it, &b.g), 0); /* stays at the end */
    pairs_sort(&got);
    CHECK(pairs_equal(&got, &want));
    cst_iter_free(it);
    pairs_free(&got);
    /* Per-pair iteration: the same pairs, every entry holding exactly one id,
     * through a small buffer so that entries split across calls. */
    for (int i = 0; i < NPAT; i++)
        for (int id = 0; id < NIDS; id++)
            if (model[i * NIDS + id])
                sub(t, pats[i], (uint64_t)id);
    it = cst_iter_new_pairs(t);
    cbuf small;
    cbuf_init(&small, 64, 3, 5);
    pairs per = {0};
    int one_each = 1;
    while ((r = cst_iter_next(it, &small.g)) > 0) {
        for (int g = 0; g < r; g++)
            one_each &= small.g.ids_end[g] - (g ? small.g.ids_end[g - 1] : 0) == 1;
        chunk_to_pairs(&small.g, (size_t)r, &per, NULL);
    }
    CHECK_EQ(r, 0);
    CHECK(one_each);
    pairs_sort(&per);
    CHECK(pairs_equal(&per, &want));
    cst_iter_free(it);
    cbuf_free(&small);
    pairs_free(&per);
    cbuf_free(&b);
    pairs_free(&want);
    free(model);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 11. 100,000 subscribers of one pattern
 * ---------------------------------------------------------------------- */

static void test_big_subscriber_set(void)
{
    int64_t start = live_after_reclaim();
    enum { N = 100000 };
    cst_trie *t = cst_new(&amqp);
    int bad = 0;
    for (uint64_t i = 0; i < N; i++)
        bad += sub(t, "news.#", i * 7 + 1) != 1;
    CHECK_EQ(bad, 0);
    CHECK_EQ(sub(t, "news.#", 8), 0); /* 1*7+1 */
    sub(t, "other", 1);
    STRICT(t);
    CHECK_EQ(cst_len(t), N + 1);
    uint64_t *ids;
    int64_t n = lookup_sorted(t, S("news.sports.x"), &ids);
    CHECK_EQ(n, N);
    CHECK(n > 0 && !sorted_has_dups(ids, (size_t)n));
    int ok = n == N;
    for (int64_t i = 0; ok && i < n; i++)
        ok = ids[i] == (uint64_t)i * 7 + 1;
    CHECK(ok);
    free(ids);
    CHECK_EQ(cst_subscribers(t, S("news.#"), NOBUF), N);
    CHECK_EQ(cst_has_subscribers(t, S("news")), 1);
    /* Iteration over the set with small buffers: split over many calls. */
    pairs got = content_bufs(t, 64, 1000, 4);
    CHECK_EQ(got.err, 0);
    CHECK_EQ(got.n, N + 1);
    CHECK(got.calls >= N / 1000);
    CHECK(!pairs_has_dups(&got));
    ok = got.n == N + 1;
    for (size_t i = 0; ok && i < N; i++)
        ok = got.v[i].plen == 6 && memcmp(got.v[i].pat, "news.#", 6) == 0 &&
             got.v[i].id == (uint64_t)i * 7 + 1;
    CHECK(ok);
    pairs_free(&got);
    /* A snapshot keeps the whole set while the live trie loses it. */
    cst_trie *s = cst_snapshot(t, 1);
    bad = 0;
    for (uint64_t i = 0; i < N; i++)
        bad += unsub(t, "news.#", i * 7 + 1) != 1;
    CHECK_EQ(bad, 0);
    CHECK_EQ(nlook(t, "news.x"), 0);
    CHECK_EQ(cst_len(t), 1);
    CHECK_EQ(cst_len(s), N + 1);
    CHECK_EQ(nlook(s, "news.x"), N);
    STRICT(t);
    STRICT(s);
    cst_free(s);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 12. Wide levels: 100,000 words under one node (and at the root)
 * ---------------------------------------------------------------------- */

static void test_wide_level(void)
{
    int64_t start = live_after_reclaim();
    enum { N = 100000 };
    cst_trie *t = cst_new(&amqp);
    char buf[64];
    int bad = 0;
    for (int i = 0; i < N; i++) {
        int l = snprintf(buf, sizeof buf, "w.k%d", i);
        bad += cst_subscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
    }
    for (int i = 0; i < N; i += 10) {
        int l = snprintf(buf, sizeof buf, "r%d", i); /* wide root level too */
        bad += cst_subscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
    }
    CHECK_EQ(bad, 0);
    STRICT(t);
    CHECK_EQ(cst_len(t), N + N / 10);
    bad = 0;
    for (int i = 0; i < N; i++) {
        int l = snprintf(buf, sizeof buf, "w.k%d", i);
        uint64_t out[2];
        int64_t n = cst_lookup(t, buf, (size_t)l, out, 2);
        bad += !(n == 1 && out[0] == (uint64_t)i);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(nlook(t, "w.nope"), 0);
    CHECK_EQ(nlook(t, "r50"), 1);
    pairs got = content_bufs(t, 256, 64, 100);
    CHECK_EQ(got.n, N + N / 10);
    CHECK(!pairs_has_dups(&got));
    pairs_free(&got);
    cst_stats st;
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK(st.inodes > 1000); /* hash-array-mapped, not one flat node */
    bad = 0;
    for (int i = 0; i < N; i++) {
        int l = snprintf(buf, sizeof buf, "w.k%d", i);
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
    }
    CHECK_EQ(bad, 0);
    STRICT(t);
    for (int i = 0; i < N; i += 10) {
        int l = snprintf(buf, sizeof buf, "r%d", i);
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(cst_len(t), 0);
    STRICT(t);
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK_EQ(st.cnodes, 1);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 13. Forced hash collisions (L-nodes)
 * ---------------------------------------------------------------------- */

/* Single-level words only: collision lists of S-nodes without child levels. */
static void collisions_flat(uint64_t mask, int nwords)
{
    int64_t start = live_after_reclaim();
    cst_debug_set_hash_mask(mask);
    cst_trie *t = cst_new(&amqp);
    char buf[32];
    int bad = 0;
    for (int i = 0; i < nwords; i++) {
        int l = snprintf(buf, sizeof buf, "c%d", i);
        bad += cst_subscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        bad += cst_subscribe(t, buf, (size_t)l, (uint64_t)i + 100000) != 1;
    }
    CHECK_EQ(bad, 0);
    STRICT(t);
    cst_stats st;
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK(st.lnodes >= 1);
    CHECK_EQ(cst_len(t), 2 * nwords);
    bad = 0;
    for (int i = 0; i < nwords; i++) {
        int l = snprintf(buf, sizeof buf, "c%d", i);
        uint64_t out[4];
        int64_t n = cst_lookup(t, buf, (size_t)l, out, 4);
        bad += !(n == 2 && ((out[0] == (uint64_t)i && out[1] == (uint64_t)i + 100000) ||
                            (out[1] == (uint64_t)i && out[0] == (uint64_t)i + 100000)));
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(nlook(t, "c-none"), 0);
    cst_trie *s = cst_snapshot(t, 1);
    bad = 0;
    for (int i = 0; i < nwords; i += 2) {
        int l = snprintf(buf, sizeof buf, "c%d", i);
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i + 100000) != 1;
    }
    CHECK_EQ(bad, 0);
    STRICT(t);
    CHECK_EQ(cst_len(t), nwords);
    CHECK_EQ(cst_len(s), 2 * nwords);
    for (int i = 1; i < nwords; i += 2) {
        int l = snprintf(buf, sizeof buf, "c%d", i);
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i + 100000) != 1;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(cst_len(t), 0);
    STRICT(t);
    STRICT(s);
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK_EQ(st.cnodes, 1);
    cst_free(s);
    cst_free(t);
    cst_debug_set_hash_mask(~UINT64_C(0));
    CHECK_NO_LEAK(start);
}

/* Multi-level patterns whose first words collide: S-nodes with child topic
 * levels inside L-nodes, then removals that empty those levels.  Run in a
 * watchdog-guarded child (see run_isolated): the engine may livelock here. */
static uint64_t g_coll_mask;

static void collisions_deep(void)
{
    cst_debug_set_hash_mask(g_coll_mask);
    enum { NW = 60 };
    cst_trie *t = cst_new(&amqp);
    char buf[64];
    int bad = 0;
    /* Insert: colliding words, each with its own subscriber and a sub-level. */
    for (int i = 0; i < NW; i++) {
        int l = snprintf(buf, sizeof buf, "c%d.x.y", i);
        bad += cst_subscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        l = snprintf(buf, sizeof buf, "c%d", i);
        bad += cst_subscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        PROGRESS();
    }
    CHECK_EQ(bad, 0);
    STRICT(t);
    cst_stats st;
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK(st.lnodes >= 1);
    for (int i = 0; i < NW; i++) {
        int l = snprintf(buf, sizeof buf, "c%d.x.y", i);
        uint64_t out[2];
        bad += !(cst_lookup(t, buf, (size_t)l, out, 2) == 1 && out[0] == (uint64_t)i);
        l = snprintf(buf, sizeof buf, "c%d.x", i);
        bad += cst_lookup(t, buf, (size_t)l, out, 2) != 0;
        PROGRESS();
    }
    CHECK_EQ(bad, 0);
    /* Remove the sub-levels: each c%d keeps its subscriber, its child level
     * becomes empty and must be pruned. */
    for (int i = 0; i < NW; i++) {
        int l = snprintf(buf, sizeof buf, "c%d.x.y", i);
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        PROGRESS();
    }
    CHECK_EQ(bad, 0);
    STRICT(t);
    CHECK_EQ(cst_len(t), NW);
    PROGRESS();
    /* Re-grow the emptied levels (livelocks if an entombed level is left
     * under an S-node of an L-node), then remove everything. */
    for (int i = 0; i < NW; i++) {
        int l = snprintf(buf, sizeof buf, "c%d.q", i);
        bad += cst_subscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        PROGRESS();
    }
    CHECK_EQ(bad, 0);
    for (int i = 0; i < NW; i++) {
        int l = snprintf(buf, sizeof buf, "c%d.q", i);
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        l = snprintf(buf, sizeof buf, "c%d", i);
        bad += cst_unsubscribe(t, buf, (size_t)l, (uint64_t)i) != 1;
        PROGRESS();
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(cst_len(t), 0);
    STRICT(t);
    cst_free(t);
    cst_debug_set_hash_mask(~UINT64_C(0));
}

/* The smallest reproducer of the case above (every word collides). */
static void collisions_minimal(void)
{
    cst_debug_set_hash_mask(0);
    cst_trie *t = cst_new(&amqp);
    CHECK_EQ(sub(t, "a.x", 1), 1);
    CHECK_EQ(sub(t, "b.y", 2), 1);
    CHECK_EQ(unsub(t, "a.x", 1), 1);
    PROGRESS();
    STRICT(t);          /* fails: "entombed topic level left in a quiescent trie" */
    CHECK_EQ(sub(t, "a.z", 3), 1); /* livelocks: update() restarts forever */
    PROGRESS();
    LOOKUP_IS(t, "a.z", 3, END);
    cst_free(t);
    cst_debug_set_hash_mask(~UINT64_C(0));
}

static void *watchdog(void *arg)
{
    int limit = *(int *)arg;
    long last = -1;
    int still = 0;
    for (;;) {
        sleep(1);
        long p = atomic_load_explicit(&g_progress, memory_order_relaxed);
        still = p == last ? still + 1 : 0;
        last = p;
        if (still >= limit) {
            fprintf(stderr, "test_engine: no progress for %d s: livelock/hang in the engine\n",
                    limit);
            _exit(3);
        }
    }
    return NULL;
}

/* Run fn in a forked child with a progress watchdog: a hang or crash is a
 * reported failure.  The child's pass/fail counts come back through a pipe. */
static void run_isolated(const char *name, void (*fn)(void), int stall_limit_s)
{
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        g_fail++;
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        g_fail++;
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        g_pass = g_fail = 0;
        static int limit;
        limit = stall_limit_s;
        pthread_t th;
        pthread_create(&th, NULL, watchdog, &limit);
        pthread_detach(th);
        fn();
        long v[2] = {g_pass, g_fail};
        ssize_t w = write(fds[1], v, sizeof v);
        (void)w;
        fflush(stderr);
        _exit(0);
    }
    close(fds[1]);
    long v[2] = {0, 0};
    ssize_t got = 0;
    while (got < (ssize_t)sizeof v) {
        ssize_t r = read(fds[0], (char *)v + got, sizeof v - (size_t)got);
        if (r <= 0)
            break;
        got += r;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got == (ssize_t)sizeof v && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        g_pass += v[0];
        g_fail += v[1];
    } else {
        g_fail++;
        fprintf(stderr, "%s:%d: isolated test '%s' did not finish (%s %d%s)\n", __FILE__,
                __LINE__, name, WIFSIGNALED(status) ? "killed by signal" : "exit code",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                WIFEXITED(status) && WEXITSTATUS(status) == 3
                    ? ": the watchdog saw no progress, the engine hangs"
                    : WIFEXITED(status) && WEXITSTATUS(status) == 1
                          ? ": a sanitizer report (see above)"
                          : "");
    }
}

/* Count-only calls with out == NULL and cap == 0 ("how many?"): the result
 * must be the count, with nothing written and no undefined behaviour (run
 * isolated: under UBSan a report aborts the child only). */
static void count_only_null_buffer(void)
{
    cst_trie *t = cst_new(&amqp);
    sub(t, "a.b", 1);
    sub(t, "a.b", 2);
    sub(t, "a.*", 3);
    CHECK_EQ(cst_subscribers(t, S("a.b"), NULL, 0), 2); /* one set of two ids */
    CHECK_EQ(cst_lookup(t, S("a.x"), NULL, 0), 1);
    unsub(t, "a.*", 3);
    CHECK_EQ(cst_lookup(t, S("a.b"), NULL, 0), 2);      /* one S-node with a set */
    cst_free(t);
}

static void test_count_only_null_buffer(void)
{
    int64_t start = live_after_reclaim();
    run_isolated("count_only_null_buffer", count_only_null_buffer, 10);
    CHECK_NO_LEAK(start);
}

static void test_collisions(void)
{
    collisions_flat(0, 400);  /* one L-node holds every word */
    collisions_flat(0x3, 800); /* four L-nodes */
    run_isolated("collisions_minimal", collisions_minimal, 3);
    g_coll_mask = 0x3;
    run_isolated("collisions_deep mask 0x3", collisions_deep, 3);
    cst_debug_set_hash_mask(~UINT64_C(0));
}

/* ------------------------------------------------------------------------
 * 14. Many-level wildcards against 40-word keys (no exponential blow-up)
 * ---------------------------------------------------------------------- */

static void test_multi_wildcards(void)
{
    int64_t start = live_after_reclaim();
    const char *pats[] = {
        "#.#.#.#.#.a", "#.a.#.a.#.a.#", "a.#.#.#.#.#.b", "#.*.#.*.#", "*.#.*.#.*.#.*",
        "#.#.#.#.#.#.#.#.#.#.b", "#.b.#.b.#.b.#.b.#.b.#.b.#", "#.a.b.#", "#", "*.*.#.c",
        "#.#.#.#.#.#.#.#.#.#.#.#.#.#.#.#.#.#.#.#.c",
    };
    size_t np = sizeof pats / sizeof *pats;
    cst_trie *t = cst_new(&amqp);
    for (size_t i = 0; i < np; i++)
        CHECK_EQ(sub(t, pats[i], i), 1);
    STRICT(t);
    uint64_t rng = 99;
    char topic[256];
    double t0 = now_s();
    int mism = 0;
    cbuf b;
    cbuf_init(&b, 4096, 64, 64);
    for (int k = 0; k < 300; k++) {
        /* 40 words over {a, b} (sometimes all 'a' and a final 'b' or 'c'). */
        size_t len = 0;
        int mode = k % 3;
        for (int i = 0; i < 40; i++) {
            char c = mode == 0 ? (rng_next(&rng) & 1 ? 'a' : 'b') : 'a';
            if (i == 39 && mode == 1)
                c = 'b';
            if (i == 39 && mode == 2)
                c = 'c';
            if (i)
                topic[len++] = '.';
            topic[len++] = c;
        }
        topic[len] = 0;
        uint64_t want[32];
        size_t wn = 0;
        for (size_t i = 0; i < np; i++)
            if (ref_match(&amqp, pats[i], strlen(pats[i]), topic, len))
                want[wn++] = i;
        want[wn] = END;
        mism += !lookup_is(t, topic, want);
        mism += cst_has_subscribers(t, topic, len) != (wn > 0);
        int g = cst_match(t, topic, len, &b.g);
        mism += g != (int)wn;
        /* match entries: each matching pattern once */
        if (g > 0) {
            pairs got = {0};
            chunk_to_pairs(&b.g, (size_t)g, &got, NULL);
            pairs_sort(&got);
            mism += pairs_has_dups(&got);
            for (size_t i = 0; i < got.n; i++) {
                size_t id = (size_t)got.v[i].id;
                mism += id >= np || strlen(pats[id]) != got.v[i].plen ||
                        memcmp(pats[id], got.v[i].pat, got.v[i].plen) != 0;
            }
            pairs_free(&got);
        }
    }
    cbuf_free(&b);
    CHECK_EQ(mism, 0);
    double dt = now_s() - t0;
    printf("  multi-wildcards: 300 keys of 40 words x %zu patterns in %.3f s\n", np, dt);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 15. Out-of-memory injection
 * ---------------------------------------------------------------------- */

static void populate(cst_trie *t)
{
    char buf[64];
    for (int i = 0; i < 200; i++) {
        int l = snprintf(buf, sizeof buf, "p%d.q%d.r%d", i % 17, i % 5, i);
        cst_subscribe(t, buf, (size_t)l, (uint64_t)i);
    }
    for (uint64_t i = 0; i < 50; i++)
        sub(t, "big.set.#", i);
    sub(t, "two.ids", 1);
    sub(t, "two.ids", 2);
    sub(t, "one.id", 1);
    sub(t, "deep.only.path.here", 5);
    sub(t, "", 3);
    sub(t, "p1.*", 4);
}

typedef struct oom_op {
    const char *name;
    int kind;                  /* 0 sub, 1 unsub, 2 ro snapshot, 3 copy, 4 clear, 5 clear_take, 6 len, 7 iter */
    const char *pat;
    uint64_t id;
} oom_op;

/* Apply op with an allocation budget of k; returns the status (1/0 for
 * updates, CST_OK, or CST_ENOMEM; snapshots: 1 when non-NULL) and frees
 * whatever the op returned. */
static int oom_apply(cst_trie *t, const oom_op *op, int64_t k, pairs *snap_content)
{
    cst_fail_allocations_after(k);
    int r = 0;
    cst_trie *s = NULL;
    cst_iter *it = NULL;
    int64_t len = 0;
    switch (op->kind) {
    case 0: r = sub(t, op->pat, op->id); break;
    case 1: r = unsub(t, op->pat, op->id); break;
    case 2: s = cst_snapshot(t, 1); r = s ? 1 : CST_ENOMEM; break;
    case 3: s = cst_snapshot(t, 0); r = s ? 1 : CST_ENOMEM; break;
    case 4: r = cst_clear(t); break;
    case 5: s = cst_clear_take(t); r = s ? 1 : CST_ENOMEM; break;
    case 6: len = cst_len(t); r = len < 0 ? (int)len : 1; break;
    case 7: it = cst_iter_new(t); r = it ? 1 : CST_ENOMEM; break;
    default: break;
    }
    cst_fail_allocations_after(-1);
    if (s) {
        *snap_content = content(s);
        STRICT(s);
        if (op->kind == 3) {
            /* the copy is writable and independent */
            CHECK_EQ(sub(s, "copy.write", 1), 1);
        }
        cst_free(s);
    }
    if (it)
        cst_iter_free(it);
    return r;
}

static void test_oom(void)
{
    int64_t start = live_after_reclaim();
    static const oom_op ops[] = {
        {"subscribe new 4-word pattern", 0, "p3.q3.new.leaf", 77},
        {"subscribe new 4-word root word", 0, "zz.yy.xx.ww", 78},
        {"subscribe into a 50-id set", 0, "big.set.#", 1000},
        {"subscribe second id (pair set)", 0, "one.id", 2},
        {"subscribe existing", 0, "two.ids", 1},
        {"subscribe zero-word pattern", 0, "", 4},
        {"unsubscribe deep sole pattern", 1, "deep.only.path.here", 5},
        {"unsubscribe from a 50-id set", 1, "big.set.#", 7},
        {"unsubscribe from a 2-id set", 1, "two.ids", 2},
        {"unsubscribe leaf of a chain", 1, "p3.q3.r3", 3},
        {"unsubscribe absent", 1, "p3.q3.nope", 3},
        {"read-only snapshot", 2, NULL, 0},
        {"writable copy", 3, NULL, 0},
        {"len", 6, NULL, 0},
        {"iterator", 7, NULL, 0},
        {"clear", 4, NULL, 0},
        {"clear_take", 5, NULL, 0},
    };
    size_t nops = sizeof ops / sizeof *ops;
    /* Each op twice: on a fresh trie, and on one with a live read-only
     * snapshot (so updates must also renew the path, allocating more). */
    for (int with_snap = 0; with_snap < 2; with_snap++) {
        for (size_t o = 0; o < nops; o++) {
            const oom_op *op = &ops[o];
            cst_trie *t = cst_new(&amqp);
            populate(t);
            cst_trie *keep = with_snap ? cst_snapshot(t, 1) : NULL;
            pairs keep_before = keep ? content(keep) : (pairs){0};
            pairs before = content(t);
            int64_t k;
            int r = CST_ENOMEM;
            int failures = 0;
            for (k = 0; k < 10000; k++) {
                pairs sc = {0};
                r = oom_apply(t, op, k, &sc);
                pairs after = content(t);
                if (r == CST_ENOMEM) {
                    failures++;
                    int same = pairs_equal(&after, &before);
                    if (!same)
                        fprintf(stderr, "  OOM '%s' k=%" PRId64 ": trie changed\n", op->name, k);
                    CHECK(same);
                    CHECK_TRIE(t, 1);
                    pairs_free(&after);
                    pairs_free(&sc);
                    continue;
                }
                /* Success: the expected effect, a sound structure. */
                CHECK(r >= 0);
                switch (op->kind) {
                case 0:
                case 1:
                    CHECK_EQ(r, strcmp(op->name, "subscribe existing") == 0 ||
                                        strcmp(op->name, "unsubscribe absent") == 0
                                    ? 0
                                    : 1);
                    CHECK_EQ((int64_t)after.n,
                             (int64_t)before.n + (op->kind == 0 ? r : -r));
                    break;
                case 2:
                case 3:
                case 6:
                case 7:
                    CHECK(pairs_equal(&after, &before));
                    if (op->kind == 2 || op->kind == 3)
                        CHECK(pairs_equal(&sc, &before));
                    break;
                case 4:
                    CHECK_EQ(after.n, 0);
                    break;
                case 5:
                    CHECK_EQ(after.n, 0);
                    CHECK(pairs_equal(&sc, &before));
                    break;
                default:
                    break;
                }
                char msg[256];
                /* A cleanup that ran out of memory may leave a tomb: the
                 * structure is sound, and cst_compact removes it. */
                CHECK_EQ(cst_check(t, 0, msg, sizeof msg), 0);
                CHECK_EQ(cst_compact(t), CST_OK);
                int cr = cst_check(t, 1, msg, sizeof msg);
                if (cr != 0) {
                    g_fail++;
                    fprintf(stderr,
                            "%s:%d: after OOM op '%s'%s succeeded with budget k=%" PRId64
                            ": cst_check strict: %s\n",
                            __FILE__, __LINE__, op->name, with_snap ? " (live snapshot)" : "",
                            k, msg);
                } else {
                    g_pass++;
                }
                pairs_free(&after);
                pairs_free(&sc);
                break;
            }
            CHECK(r != CST_ENOMEM);
            /* Allocation-free ops may succeed at once; the rest must fail first. */
            if (strcmp(op->name, "subscribe existing") != 0 &&
                strcmp(op->name, "unsubscribe absent") != 0)
                CHECK(failures > 0);
            if (keep) {
                pairs ka = content(keep);
                CHECK(pairs_equal(&ka, &keep_before));
                STRICT(keep);
                pairs_free(&ka);
            }
            pairs_free(&keep_before);
            pairs_free(&before);
            cst_free(keep);
            cst_free(t);
        }
    }
    /* cst_new under OOM: NULL, no leak. */
    for (int64_t k = 0; k < 100; k++) {
        cst_fail_allocations_after(k);
        cst_trie *t = cst_new(&amqp);
        cst_fail_allocations_after(-1);
        if (t) {
            CHECK(k > 0);
            cst_free(t);
            break;
        }
    }
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * 16. An idle thread's garbage
 *
 * A thread takes a snapshot of a populated trie; the trie then changes
 * completely; the thread frees its snapshot and goes idle (a Python worker
 * thread that exported a snapshot and now waits for work).  The snapshot was
 * the last holder of the old version, so the whole old version is garbage.
 * Another thread's cst_reclaim() must be able to free it: an idle thread
 * must not keep memory alive indefinitely.
 * ---------------------------------------------------------------------- */

typedef struct idle_ctl {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage;
    cst_trie *t;
} idle_ctl;

static void idle_wait(idle_ctl *c, int stage)
{
    pthread_mutex_lock(&c->mu);
    while (c->stage < stage)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static void idle_go(idle_ctl *c, int stage)
{
    pthread_mutex_lock(&c->mu);
    c->stage = stage;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void *idle_snapshot_thread(void *arg)
{
    idle_ctl *c = arg;
    cst_trie *snap = cst_snapshot(c->t, 1);
    idle_go(c, 1);
    idle_wait(c, 2);
    cst_free(snap); /* the last reference to the old version */
    idle_go(c, 3);
    idle_wait(c, 4); /* idle */
    return NULL;
}

static void test_idle_thread_garbage(void)
{
    int64_t start = live_after_reclaim();
    enum { N = 5000 };
    idle_ctl c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, cst_new(&amqp)};
    char buf[32];
    for (int i = 0; i < N; i++) {
        int l = snprintf(buf, sizeof buf, "k%d.x", i);
        cst_subscribe(c.t, buf, (size_t)l, 1);
    }
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, idle_snapshot_thread, &c), 0);
    idle_wait(&c, 1);
    for (int i = 0; i < N; i++) {
        int l = snprintf(buf, sizeof buf, "k%d.x", i);
        cst_unsubscribe(c.t, buf, (size_t)l, 1);
    }
    idle_go(&c, 2);
    idle_wait(&c, 3);
    /* The other thread is idle now; reclaim from here. */
    int64_t pending = cst_reclaim();
    int64_t live = cst_live_allocations() - start;
    cst_stats st;
    CHECK_EQ(cst_stats_get(c.t, &st), 0);
    int64_t nodes = st.inodes + st.cnodes + st.snodes + st.tnodes + st.lnodes + st.setnodes;
    if (live > nodes + 2 + 64) {
        g_fail++;
        fprintf(stderr,
                "%s:%d: an idle thread keeps freed memory alive: %" PRId64
                " live allocations for a trie of %" PRId64 " nodes (cst_reclaim() = %" PRId64
                " pending) until that thread runs again or exits\n",
                __FILE__, __LINE__, live, nodes, pending);
    } else {
        g_pass++;
    }
    idle_go(&c, 4);
    pthread_join(th, NULL);
    CHECK(live_after_reclaim() - start <= nodes + 2 + 64); /* released at thread exit */
    cst_free(c.t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * Hostile input: deep patterns through every entry point, prompt
 * reclamation of a dropped trie, fork while a thread is inside the engine
 * ---------------------------------------------------------------------- */

/* `levels` copies of word joined by sep, the last one replaced by last. */
static char *deep_text(size_t levels, const char *word, const char *sep, const char *last,
                       size_t *len)
{
    size_t wl = strlen(word), sl = strlen(sep), ll = strlen(last);
    char *s = xcalloc(levels * (wl + sl) + ll + 1, 1);
    size_t n = 0;
    for (size_t i = 0; i + 1 < levels; i++) {
        memcpy(s + n, word, wl);
        n += wl;
        memcpy(s + n, sep, sl);
        n += sl;
    }
    memcpy(s + n, last, ll);
    n += ll;
    *len = n;
    return s;
}

/* Subscribe two ids to pat (levels deep) and run every entry point over it:
 * nothing may recurse per level on the C stack. */
static void deep_entry_points(const cst_dialect *d, const char *pat, size_t plen,
                              const char *topic, size_t tlen, int64_t levels)
{
    cst_trie *t = cst_new(d);
    CHECK_EQ(cst_validate(t, pat, plen, 1), levels);
    CHECK_EQ(cst_subscribe(t, pat, plen, 7), 1);
    CHECK_EQ(cst_subscribe(t, pat, plen, 8), 1); /* walks the whole path again */
    CHECK_EQ(cst_subscribe(t, pat, plen, 8), 0);
    uint64_t out[4];
    CHECK_EQ(cst_lookup(t, topic, tlen, out, 4), 2);
    CHECK_EQ(cst_has_subscribers(t, topic, tlen), 1);
    cbuf b;
    cbuf_init(&b, plen + 16, 8, 4);
    CHECK_EQ(cst_match(t, topic, tlen, &b.g), 1);
    CHECK(b.g.pat_end[0] == (int64_t)plen && memcmp(b.g.pat, pat, plen) == 0);
    cbuf_free(&b);
    CHECK_EQ(cst_subscribers(t, pat, plen, out, 4), 2);
    CHECK_EQ(cst_len(t), 2);
    cst_stats st;
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK_EQ(st.max_depth, levels);
    CHECK_EQ(st.pairs, 2);
    STRICT(t);
    CHECK(cst_dump(t, NULL, 0) > (size_t)levels);
    pairs ps = content_bufs(t, plen + 16, 16, 16);
    CHECK(ps.n == 2 && ps.v[0].plen == plen && memcmp(ps.v[0].pat, pat, plen) == 0);
    pairs_free(&ps);
    /* Removal under a snapshot renews the whole path, then prunes it. */
    cst_trie *snap = cst_snapshot(t, 1);
    CHECK_EQ(cst_unsubscribe(t, pat, plen, 7), 1);
    CHECK_EQ(cst_unsubscribe(t, pat, plen, 8), 1);
    CHECK_EQ(cst_unsubscribe(t, pat, plen, 8), 0);
    CHECK_EQ(cst_len(t), 0);
    CHECK_EQ(cst_len(snap), 2);
    CHECK_EQ(cst_compact(t), 0);
    STRICT(t);
    cst_free(snap);
    /* A copy that shares the deep path, then frees it. */
    CHECK_EQ(cst_subscribe(t, pat, plen, 9), 1);
    cst_trie *copy = cst_snapshot(t, 0);
    CHECK_EQ(cst_unsubscribe(copy, pat, plen, 9), 1);
    CHECK_EQ(cst_lookup(t, topic, tlen, out, 4), 1);
    cst_free(copy);
    cst_free(t); /* destroys the 9's path: iterative destruction */
    /* The bulk build of the same pattern. */
    int64_t off[2] = {0, (int64_t)plen};
    uint64_t ids[1] = {1};
    int status;
    int64_t bad;
    cst_trie *built = cst_build(d, pat, plen, off, ids, 1, 1, NULL, &status, &bad);
    CHECK(built != NULL);
    if (built) {
        CHECK_EQ(cst_lookup(built, topic, tlen, out, 4), 1);
        STRICT(built);
        cst_free(built);
    }
}

static void test_deep_levels(void)
{
    int64_t start = live_after_reclaim();
    size_t pl, tl;
    /* MQTT: 65,535 empty levels (a valid 65,534-byte filter and topic). */
    char *p = deep_text(65535, "", "/", "", &pl);
    deep_entry_points(&mqtt, p, pl, p, pl, 65535);
    free(p);
    /* MQTT: a one-level wildcard on every level, and '#' after 32,766. */
    p = deep_text(32768, "+", "/", "+", &pl);
    char *q = deep_text(32768, "a", "/", "a", &tl);
    deep_entry_points(&mqtt, p, pl, q, tl, 32768);
    free(p);
    p = deep_text(32767, "a", "/", "#", &pl);
    deep_entry_points(&mqtt, p, pl, q, tl, 32767);
    free(p);
    free(q);
    /* AMQP without a level limit: 40,000 words. */
    p = deep_text(40000, "w", ".", "*", &pl);
    q = deep_text(40000, "w", ".", "x", &tl);
    deep_entry_points(&amqp, p, pl, q, tl, 40000);
    free(p);
    free(q);
    CHECK_NO_LEAK(start);
}

/* A thread that holds an epoch section open until told to leave it (as a
 * thread inside a long engine call would). */
typedef struct holder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage;                 /* 1 inside, 2 leave, 3 left */
} holder;

static void holder_set(holder *h, int stage)
{
    pthread_mutex_lock(&h->mu);
    h->stage = stage;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void holder_wait(holder *h, int stage)
{
    pthread_mutex_lock(&h->mu);
    while (h->stage < stage)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void *holder_thread(void *arg)
{
    holder *h = arg;
    ebr_record *rec = ebr_enter();
    holder_set(h, 1);
    holder_wait(h, 2);
    ebr_exit(rec); /* its first exit after the drop: the trie goes here */
    holder_set(h, 3);
    return NULL;
}

static cst_trie *filled_trie(int n)
{
    cst_trie *t = cst_new(&amqp);
    char buf[48];
    for (int i = 0; i < n; i++) {
        int l = snprintf(buf, sizeof buf, "s%d.d%d.m%d", i % 50, i % 977, i);
        cst_subscribe(t, buf, (size_t)l, (uint64_t)(i % 5000) + 1);
    }
    return t;
}

/* A dropped trie comes back by the time cst_free returns when no other thread
 * is inside an engine call; with one inside, at that thread's next exit. */
static void test_prompt_reclaim(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = filled_trie(20000);
    CHECK(cst_live_allocations() - start > 20000);
    cst_free(t); /* no cst_reclaim() here: the free itself must do it */
    CHECK_EQ(cst_live_allocations(), start);

    holder h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, holder_thread, &h), 0);
    holder_wait(&h, 1);
    t = filled_trie(20000);
    int64_t full = cst_live_allocations() - start;
    cst_free(t);
    /* The other thread's open section (an older epoch) keeps it alive. */
    CHECK(cst_live_allocations() - start > full / 2);
    holder_set(&h, 2);
    holder_wait(&h, 3);
    CHECK_EQ(cst_live_allocations(), start);
    pthread_join(th, NULL);
    CHECK_NO_LEAK(start);
}

/* fork() while another thread is inside an engine call: the child must not
 * hang and must keep reclaiming (its copy of that thread's record must not
 * hold the epoch back forever). */
static void test_fork_reclaims(void)
{
    int64_t start = live_after_reclaim();
    holder h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, holder_thread, &h), 0);
    holder_wait(&h, 1);
    cst_trie *t = filled_trie(2000);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60); /* a hang is a failure, not a stuck CI job */
        int64_t base = cst_live_allocations();
        char buf[48];
        for (int i = 0; i < 100000; i++) {
            int l = snprintf(buf, sizeof buf, "c.%d.x", i % 512);
            cst_subscribe(t, buf, (size_t)l, 424242);
            cst_unsubscribe(t, buf, (size_t)l, 424242);
        }
        int64_t grown = cst_live_allocations() - base;
        int64_t pending = cst_reclaim();
        cst_free(t);
        int ok = grown < 5000 && pending == 0;
        if (!ok)
            fprintf(stderr, "fork child: live allocations grew by %" PRId64 ", %" PRId64
                            " pending after cst_reclaim()\n", grown, pending);
        _exit(ok ? 0 : 2);
    }
    CHECK(pid > 0);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    holder_set(&h, 2);
    holder_wait(&h, 3);
    pthread_join(th, NULL);
    cst_free(t);
    CHECK_NO_LEAK(start);
}

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

static void test_block_build(void)
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

static void test_build_offsets(void)
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

/* The allocation counters are per thread (alloc.c): they must stay exact when
 * memory is allocated in one thread and freed in another, and when threads
 * exit and later threads take over their counter sets. */
enum { ALLOC_JOB_N = 1000 };
typedef struct alloc_job {
    void *p[ALLOC_JOB_N];
} alloc_job;

static void *alloc_job_thread(void *arg)
{
    alloc_job *j = arg;
    for (size_t i = 0; i < ALLOC_JOB_N; i++)
        j->p[i] = cst_alloc(16 + i);
    return NULL;
}

static void *free_job_thread(void *arg)
{
    alloc_job *j = arg;
    for (size_t i = 0; i < ALLOC_JOB_N; i++)
        cst_dealloc(j->p[i], 16 + i);
    return NULL;
}

static void run_jobs(void *(*fn)(void *), alloc_job *jobs, int n)
{
    pthread_t th[8];
    for (int i = 0; i < n; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, fn, &jobs[i]), 0);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

static void test_alloc_counters(void)
{
    enum { ROUNDS = 6, THREADS = 4 };
    const int64_t job_bytes = ALLOC_JOB_N * 16 + (int64_t)ALLOC_JOB_N * (ALLOC_JOB_N - 1) / 2;
    int64_t live0 = cst_alloc_live_count(), bytes0 = cst_alloc_live_bytes();
    int64_t total0 = cst_alloc_total_count(), frees0 = cst_alloc_total_frees();
    alloc_job *jobs = xcalloc(THREADS, sizeof *jobs);
    for (int r = 0; r < ROUNDS; r++) {
        run_jobs(alloc_job_thread, jobs, THREADS); /* threads that exit at once */
        CHECK_EQ(cst_alloc_live_count(), live0 + THREADS * ALLOC_JOB_N);
        CHECK_EQ(cst_alloc_live_bytes(), bytes0 + THREADS * job_bytes);
        if (r % 2 == 0) { /* freed by this thread ... */
            for (int i = 0; i < THREADS; i++)
                free_job_thread(&jobs[i]);
        } else { /* ... or by new threads (which may take over exited ones' counter sets) */
            run_jobs(free_job_thread, jobs, THREADS);
        }
        CHECK_EQ(cst_alloc_live_count(), live0);
        CHECK_EQ(cst_alloc_live_bytes(), bytes0);
    }
    CHECK_EQ(cst_alloc_total_count(), total0 + ROUNDS * THREADS * ALLOC_JOB_N);
    CHECK_EQ(cst_alloc_total_frees(), frees0 + ROUNDS * THREADS * ALLOC_JOB_N);
    free(jobs);
}

/* Numbers in order of first appearance, across calls; id 0 is an id like any
 * other; the table grows past its first size without renumbering. */
static void test_numbering(void)
{
    cst_numbering *nm = cst_numbering_new();
    CHECK(nm != NULL);
    uint64_t ids[] = {7, 3, 7, 0, 3, 9}, refs[6], fresh[6];
    CHECK(cst_numbering_apply(nm, ids, 6, refs, fresh) == 4);
    uint64_t want_refs[] = {1, 2, 1, 3, 2, 4}, want_fresh[] = {7, 3, 0, 9};
    CHECK(memcmp(refs, want_refs, sizeof refs) == 0);
    CHECK(memcmp(fresh, want_fresh, sizeof want_fresh) == 0);
    uint64_t again[] = {9, 0, 11};
    CHECK(cst_numbering_apply(nm, again, 3, refs, fresh) == 1);
    CHECK(refs[0] == 4 && refs[1] == 3 && refs[2] == 5 && fresh[0] == 11);
    enum { BIG = 100000 };
    uint64_t *many = malloc(BIG * sizeof *many), *r = malloc(BIG * sizeof *r),
             *f = malloc(BIG * sizeof *f);
    CHECK(many && r && f);
    for (size_t i = 0; i < BIG; i++)
        many[i] = (uint64_t)(BIG - i) * 1000003u; /* none seen before */
    CHECK(cst_numbering_apply(nm, many, BIG, r, f) == BIG);
    int ok = 1;
    for (size_t i = 0; i < BIG; i++)
        ok &= r[i] == 6 + i && f[i] == many[i];
    CHECK(ok);
    CHECK(cst_numbering_apply(nm, ids, 6, refs, fresh) == 0);
    CHECK(memcmp(refs, want_refs, sizeof refs) == 0);
    free(many);
    free(r);
    free(f);
    cst_numbering_free(nm);

    /* cst_count_ids: kept pairs per id; an id above max_id counts nothing */
    uint64_t cids[] = {1, 3, 1, 2, 1};
    uint8_t kept[] = {1, 1, 0, 1, 1};
    uint32_t counts[4] = {0};
    CHECK(cst_count_ids(cids, kept, 5, counts, 3) == CST_OK);
    CHECK(counts[0] == 0 && counts[1] == 2 && counts[2] == 1 && counts[3] == 1);
    uint32_t none[3] = {0};
    CHECK(cst_count_ids(cids, NULL, 5, none, 2) == CST_EINVAL);
    CHECK(none[0] == 0 && none[1] == 0 && none[2] == 0);
}

/* ------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------- */

typedef struct test {
    const char *name;
    void (*fn)(void);
} test;

/* ------------------------------------------------------------------------
 * Share groups
 * ---------------------------------------------------------------------- */

static int jsub(cst_trie *t, const char *p, uint64_t g, uint64_t id)
{
    return cst_share_subscribe(t, p, strlen(p), g, id);
}
static int jleave(cst_trie *t, const char *p, uint64_t g, uint64_t id)
{
    return cst_share_unsubscribe(t, p, strlen(p), g, id);
}

/* A pick that records what it was asked and answers index `k` (or a hash). */
typedef struct pick_log {
    int calls;
    uint64_t share[8], n[8];
    uint64_t k;
    int how;
} pick_log;

static int pick_fixed(void *arg, uint64_t share, uint64_t n, uint64_t *k)
{
    pick_log *l = arg;
    if (l->calls < 8) {
        l->share[l->calls] = share;
        l->n[l->calls] = n;
    }
    l->calls++;
    *k = l->k;
    return l->how;
}

static int pick_abort(void *arg, uint64_t share, uint64_t n, uint64_t *k)
{
    (void)arg, (void)share, (void)n, (void)k;
    return -1;
}

static int64_t route(cst_trie *t, const char *topic, pick_log *l, uint64_t *out, uint64_t *sh,
                     size_t cap, size_t *np)
{
    l->calls = 0;
    return cst_route(t, topic, strlen(topic), pick_fixed, l, out, sh, cap, np);
}

static void test_share_groups(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = cst_new(&mqtt);
    CHECK(t != NULL);
    uint64_t out[16], sh[16], buf[16];
    size_t np;
    pick_log l = {0};
    CHECK_EQ(cst_share_subscribe(t, "a/+", 3, 0, 1), CST_EINVAL); /* group id 0 */
    CHECK_EQ(jsub(t, "a/#/b", 7, 1), CST_EMULTIPOS);               /* the filter's own rules */
    CHECK_EQ(jsub(t, "a/+", 7, 1), 1);
    CHECK_EQ(jsub(t, "a/+", 7, 1), 0);
    CHECK_EQ(jsub(t, "a/+", 7, 2), 1);
    CHECK_EQ(jsub(t, "a/#", 7, 3), 1); /* the same group on a second filter */
    CHECK_EQ(jsub(t, "a/#", 8, 4), 1); /* another group */
    CHECK_EQ(sub(t, "a/+", 10), 1);    /* an ordinary subscriber of a/+ */
    STRICT(t);
    CHECK_EQ(cst_len(t), 5);
    /* lookups never see members */
    CHECK_EQ(cst_lookup(t, "a/x", 3, buf, 16), 1);
    CHECK_EQ(buf[0], 10);
    CHECK_EQ(cst_lookup(t, "a", 1, buf, 16), 0);
    CHECK_EQ(cst_has_subscribers(t, "a/x/y", 5), 0);
    /* a route: the ordinary subscriber, then one member of group 7 (the
     * union {1, 2, 3} of its two matching filters, in id order) and of 8 */
    l.k = 2;
    CHECK_EQ(route(t, "a/x", &l, out, sh, 16, &np), 3);
    CHECK_EQ(np, 1);
    CHECK_EQ(out[0], 10);
    CHECK_EQ(l.calls, 2);
    CHECK_EQ(l.share[0], 7);
    CHECK_EQ(l.n[0], 3);
    CHECK_EQ(l.share[1], 8);
    CHECK_EQ(l.n[1], 1);
    CHECK_EQ(sh[0], 7);
    CHECK_EQ(out[1], 3); /* index 2 of {1, 2, 3} */
    CHECK_EQ(sh[1], 8);
    CHECK_EQ(out[2], 4); /* index 2 of {4}: taken modulo n */
    /* "a" matches only a/# (MQTT: '#' matches the parent level) */
    l.k = 0;
    CHECK_EQ(route(t, "a", &l, out, sh, 16, &np), 2);
    CHECK_EQ(np, 0);
    CHECK_EQ(l.n[0], 1);
    CHECK_EQ(out[0], 3);
    CHECK_EQ(out[1], 4);
    /* too small a buffer: the total, and nothing picked */
    CHECK_EQ(route(t, "a/x", &l, out, sh, 2, &np), 3);
    CHECK_EQ(l.calls, 0);
    /* the hash form picks the same member for the same key */
    l.how = CST_PICK_HASH;
    l.k = 12345;
    CHECK_EQ(route(t, "a/x", &l, out, sh, 16, &np), 3);
    uint64_t first = out[1];
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(route(t, "a/x", &l, out, sh, 16, &np), 3);
        CHECK_EQ(out[1], first);
    }
    l.how = CST_PICK_INDEX;
    /* a pick that gives up abandons the route */
    CHECK_EQ(cst_route(t, "a/x", 3, pick_abort, NULL, out, sh, 16, &np), CST_EPICK);
    /* the dollar rule applies to the group's filter */
    CHECK_EQ(route(t, "$a/x", &l, out, sh, 16, &np), 0);
    /* members by exact filter */
    CHECK_EQ(cst_share_members(t, "a/+", 3, 7, buf, 16), 2);
    CHECK_EQ(cst_share_members(t, "a/+", 3, 8, buf, 16), 0);
    CHECK_EQ(cst_subscribers(t, "a/+", 3, buf, 16), 1);
    /* iteration: ordinary groups, and share groups only when asked for */
    {
        char pat[256];
        uint64_t ids[64], share[16];
        int64_t pe[16], ie[16];
        cst_chunk g = {pat, sizeof pat, ids, 64, pe, ie, 16, 0, 0, 0, 0, NULL};
        cst_iter *it = cst_iter_new(t);
        CHECK_EQ(cst_iter_next(it, &g), 1); /* a/+ only */
        CHECK_EQ(cst_iter_next(it, &g), 0);
        cst_iter_free(it);
        g.share = share;
        it = cst_iter_new(t);
        int n = cst_iter_next(it, &g);
        CHECK_EQ(n, 4); /* a/+ ordinary, a/+ group 7, a/# group 7, a/# group 8 */
        int seen7 = 0, seen8 = 0, plain = 0;
        for (int i = 0; i < n; i++) {
            int64_t p0 = i ? pe[i - 1] : 0;
            const char *p = pat + p0;
            size_t plen = (size_t)(pe[i] - p0);
            if (share[i] == 0)
                plain += plen == 3 && memcmp(p, "a/+", 3) == 0;
            else if (share[i] == 7)
                seen7++;
            else if (share[i] == 8)
                seen8 += plen == 3 && memcmp(p, "a/#", 3) == 0;
        }
        CHECK_EQ(plain, 1);
        CHECK_EQ(seen7, 2);
        CHECK_EQ(seen8, 1);
        cst_iter_free(it);
    }
    cst_stats st;
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK_EQ(st.share_pairs, 4);
    CHECK_EQ(st.share_groups, 3);
    CHECK_EQ(st.max_depth, 2);
    /* a snapshot keeps the members it saw */
    cst_trie *s = cst_snapshot(t, 1);
    CHECK_EQ(jleave(t, "a/+", 7, 1), 1);
    CHECK_EQ(jleave(t, "a/+", 7, 1), 0);
    CHECK_EQ(jleave(s, "a/+", 7, 2), CST_EREADONLY);
    l.k = 0;
    CHECK_EQ(route(s, "a/x", &l, out, sh, 16, &np), 3);
    CHECK_EQ(l.n[0], 3);
    CHECK_EQ(route(t, "a/x", &l, out, sh, 16, &np), 3);
    CHECK_EQ(l.n[0], 2);
    /* leaving prunes everything: the trie is back to the ordinary pair */
    CHECK_EQ(jleave(t, "a/+", 7, 2), 1);
    CHECK_EQ(jleave(t, "a/#", 7, 3), 1);
    CHECK_EQ(jleave(t, "a/#", 8, 4), 1);
    STRICT(t);
    CHECK_EQ(cst_len(t), 1);
    CHECK_EQ(route(t, "a/x", &l, out, sh, 16, &np), 1);
    CHECK_EQ(l.calls, 0);
    CHECK_EQ(cst_stats_get(t, &st), 0);
    CHECK_EQ(st.share_pairs, 0);
    CHECK_EQ(st.snodes, 2); /* "a", "+" */
    /* the AMQP zero-word pattern and '#' anywhere */
    cst_trie *a = cst_new(&amqp);
    CHECK_EQ(jsub(a, "", 5, 1), 1);
    CHECK_EQ(jsub(a, "#.x", 5, 2), 1);
    CHECK_EQ(jsub(a, "#", 6, 3), 1);
    STRICT(a);
    CHECK_EQ(route(a, "", &l, out, sh, 16, &np), 2); /* groups 5 ("" ) and 6 ("#") */
    CHECK_EQ(route(a, "q.x", &l, out, sh, 16, &np), 2);
    CHECK_EQ(route(a, "q.y", &l, out, sh, 16, &np), 1);
    CHECK_EQ(sh[0], 6);
    CHECK_EQ(cst_lookup(a, "", 0, buf, 16), 0);
    CHECK_EQ(jleave(a, "", 5, 1), 1);
    CHECK_EQ(jleave(a, "#.x", 5, 2), 1);
    CHECK_EQ(jleave(a, "#", 6, 3), 1);
    STRICT(a);
    CHECK_EQ(cst_len(a), 0);
    /* a large group: O(log n) joins, and every index is reachable */
    for (uint64_t i = 1; i <= 1000; i++)
        CHECK_EQ(jsub(a, "big.*", 9, i), 1);
    STRICT(a);
    uint64_t seen = 0;
    for (uint64_t k = 0; k < 1000; k++) {
        l.k = k;
        CHECK_EQ(route(a, "big.z", &l, out, sh, 16, &np), 1);
        seen ^= out[0];
    }
    uint64_t all = 0;
    for (uint64_t i = 1; i <= 1000; i++)
        all ^= i;
    CHECK_EQ(seen, all);
    cst_free(a);
    cst_free(s);
    cst_free(t);
    CHECK_EQ(live_after_reclaim(), start);
}


/* Topic index (cstrie.h): put/get/remove of literal topics, reverse queries
 * in chunks that fit one topic at a time, counts, and the filters walk. */
static int64_t rq_all(cst_trie *t, const char *f, size_t cap, size_t text_cap, char *seen,
                      size_t seen_cap)
{
    int err;
    cst_rquery *q = cst_rquery_new(t, f, strlen(f), &err);
    CHECK(q != NULL);
    if (q == NULL)
        return err;
    char text[64];
    int64_t ends[8];
    uint64_t ids[8];
    size_t need;
    int64_t total = 0;
    seen[0] = 0;
    for (;;) {
        int64_t r = cst_rquery_next(q, text, text_cap, ends, ids, cap, &need);
        if (r == CST_ETRUNC) {
            CHECK(need > text_cap && need <= sizeof text);
            text_cap = need;
            continue;
        }
        CHECK(r >= 0);
        if (r <= 0)
            break;
        for (int64_t k = 0; k < r; k++) {
            int64_t a = k ? ends[k - 1] : 0;
            size_t used = strlen(seen);
            snprintf(seen + used, seen_cap - used, "%.*s=%d;", (int)(ends[k] - a), text + a,
                     (int)ids[k]);
        }
        total += r;
    }
    cst_rquery_free(q);
    return total;
}

static void test_topic_index(void)
{
    int64_t start = cst_live_allocations();
    cst_trie *t = cst_new(&mqtt);
    uint64_t old = 99, id = 0;
    CHECK_EQ(cst_topic_put(t, "a/b", 3, 1, &old), 1);
    CHECK_EQ(old, 0);
    CHECK_EQ(cst_topic_put(t, "a/b", 3, 2, &old), 0);
    CHECK_EQ(old, 1);
    CHECK_EQ(cst_topic_put(t, "a/c", 3, 3, &old), 1);
    CHECK_EQ(cst_topic_put(t, "a", 1, 4, &old), 1);
    CHECK_EQ(cst_topic_put(t, "$SYS/x", 6, 5, &old), 1);
    CHECK_EQ(cst_topic_put(t, "a/+", 3, 6, &old), CST_EWILDTOPIC);
    CHECK_EQ(cst_topic_get(t, "a/b", 3, &id), 1);
    CHECK_EQ(id, 2);
    CHECK_EQ(cst_topic_get(t, "a/x", 3, &id), 0);
    char seen[256];
    /* one result and a 1-byte text buffer per call: every topic comes whole */
    CHECK_EQ(rq_all(t, "a/#", 1, 1, seen, sizeof seen), 3);
    CHECK(strstr(seen, "a=4;") && strstr(seen, "a/b=2;") && strstr(seen, "a/c=3;"));
    CHECK_EQ(rq_all(t, "#", 8, 64, seen, sizeof seen), 3); /* not $SYS/x */
    CHECK_EQ(rq_all(t, "$SYS/+", 8, 64, seen, sizeof seen), 1);
    CHECK_EQ(cst_rquery_count(t, "+/b", 3), 1);
    CHECK_EQ(cst_rquery_count(t, "a/#/b", 5), CST_EMULTIPOS);
    /* a query answers for the moment it was made */
    int err;
    cst_rquery *q = cst_rquery_new(t, "a/+", 3, &err);
    CHECK_EQ(cst_topic_remove(t, "a/b", 3, &old), 1);
    CHECK_EQ(old, 2);
    CHECK_EQ(cst_topic_remove(t, "a/b", 3, &old), 0);
    char text[64];
    int64_t ends[8];
    uint64_t ids[8];
    size_t need;
    CHECK_EQ(cst_rquery_next(q, text, sizeof text, ends, ids, 8, &need), 2);
    CHECK_EQ(cst_rquery_next(q, text, sizeof text, ends, ids, 8, &need), 0);
    cst_rquery_free(q);
    CHECK_EQ(cst_rquery_count(t, "a/+", 3), 1);
    STRICT(t);
    /* the filters walk over a subscription trie */
    cst_trie *s = cst_new(&amqp);
    CHECK_EQ(cst_subscribe(s, "a.#.b", 5, 1), 1);
    CHECK_EQ(cst_subscribe(s, "x.*", 3, 2), 1);
    q = cst_rquery_filters(s, "a.b", 3, &err);
    CHECK_EQ(cst_rquery_next(q, text, sizeof text, ends, ids, 8, &need), 1);
    CHECK(ends[0] == 5 && memcmp(text, "a.#.b", 5) == 0);
    cst_rquery_free(q);
    cst_free(s);
    cst_free(t);
    CHECK_EQ(live_after_reclaim(), start);
}

/* One walk, one state (cst_lookup's rule in cstrie.h): a writer keeps
 * subscriber 11 on '#' or '*.x.#' (or both) at every instant - subscribe the
 * one, then unsubscribe the other - while this thread looks up a topic that
 * both match, through a walk long enough (a 60-wildcard filter read between
 * the two branches) for the writer to land in between.  No lookup may come
 * back empty: not from the checked walks, not from the walks that freeze the
 * trie (walk retries 0), where the writer's updates go on in a new
 * generation. */
typedef struct mover {
    cst_trie *t;
    _Atomic int stop;
} mover;

static void *mover_thread(void *arg)
{
    mover *m = arg;
    const char *p1 = "#", *p2 = "*.x.#";
    while (!atomic_load(&m->stop)) {
        (void)cst_subscribe(m->t, p2, strlen(p2), 11);
        (void)cst_unsubscribe(m->t, p1, strlen(p1), 11);
        (void)cst_subscribe(m->t, p1, strlen(p1), 11);
        (void)cst_unsubscribe(m->t, p2, strlen(p2), 11);
    }
    return NULL;
}

static void test_walk_one_state(void)
{
    int64_t start = cst_live_allocations();
    cst_trie *t = cst_new(&amqp);
    char heavy[256] = "t";
    for (int i = 0; i < 60; i++)
        strcat(heavy, ".#");
    strcat(heavy, ".z");
    CHECK_EQ(cst_subscribe(t, heavy, strlen(heavy), 99), 1);
    CHECK_EQ(cst_subscribe(t, "#", 1, 11), 1);
    char topic[512] = "t.x";
    for (int i = 0; i < 100; i++)
        strcat(topic, ".a");
    mover m = {t, 0};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, mover_thread, &m), 0);
    int64_t rewalks0, freezes0, rewalks, freezes;
    cst_debug_walk_counts(&rewalks0, &freezes0);
    long empty = 0, frozen_empty = 0;
    uint64_t out[8];
    for (int i = 0; i < 3000; i++) {
        if (i == 2000)
            cst_debug_set_walk_retries(0);
        int64_t n = cst_lookup(t, topic, strlen(topic), out, 8);
        if (n < 1 || out[0] != 11)
            *(i < 2000 ? &empty : &frozen_empty) += 1;
    }
    cst_debug_set_walk_retries(-1);
    atomic_store(&m.stop, 1);
    pthread_join(th, NULL);
    cst_debug_walk_counts(&rewalks, &freezes);
    CHECK_EQ(empty, 0);
    CHECK_EQ(frozen_empty, 0);
    CHECK(freezes - freezes0 >= 1000);
    printf("  walk_one_state: %" PRId64 " walks run again, %" PRId64 " freezes\n",
           rewalks - rewalks0, freezes - freezes0);
    STRICT(t);
    cst_free(t);
    CHECK_EQ(live_after_reclaim(), start);
}

int main(int argc, char **argv)
{
    static const test tests[] = {
        {"subscribe_unsubscribe", test_subscribe_unsubscribe},
        {"forbidden_and_max_levels", test_forbidden_and_max_levels},
        {"amqp_lookup", test_amqp_lookup},
        {"mqtt_lookup", test_mqtt_lookup},
        {"has_subscribers", test_has_subscribers},
        {"match_chunk", test_match_chunk},
        {"subscribers", test_subscribers},
        {"count_only_null_buffer", test_count_only_null_buffer},
        {"lookup_batch", test_lookup_batch},
        {"snapshots", test_snapshots},
        {"clear", test_clear},
        {"len_and_iteration", test_len_and_iteration},
        {"big_subscriber_set", test_big_subscriber_set},
        {"wide_level", test_wide_level},
        {"collisions", test_collisions},
        {"multi_wildcards", test_multi_wildcards},
        {"oom", test_oom},
        {"numbering", test_numbering},
        {"alloc_counters", test_alloc_counters},
        {"block_build", test_block_build},
        {"build_offsets", test_build_offsets},
        {"deep_levels", test_deep_levels},
        {"prompt_reclaim", test_prompt_reclaim},
        {"share_groups", test_share_groups},
        {"walk_one_state", test_walk_one_state},
        {"topic_index", test_topic_index},
        {"fork_reclaims", test_fork_reclaims},
        {"idle_thread_garbage", test_idle_thread_garbage}, /* last: starts a thread */
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    int64_t start = cst_live_allocations();
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
        if (argc > 1) {
            int wanted = 0;
            for (int a = 1; a < argc; a++)
                wanted |= strcmp(argv[a], tests[i].name) == 0;
            if (!wanted)
                continue;
        }
        long f0 = g_fail;
        double t0 = now_s();
        tests[i].fn();
        printf("%-24s %s (%.2f s)\n", tests[i].name, g_fail == f0 ? "ok" : "FAILED",
               now_s() - t0);
    }
    /* Leaks: every trie and snapshot is freed. */
    CHECK_EQ(cst_reclaim(), 0);
    CHECK_EQ(cst_live_allocations(), start);
    if (g_iter_empty_entries)
        printf("note: cst_iter_next returned %ld partial entries with no ids\n",
               g_iter_empty_entries);
    printf("%ld passed, %ld failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
