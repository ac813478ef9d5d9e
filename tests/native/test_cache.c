/*
 * test_cache.c - the result cache (cache.c): a cached trie answers every
 * lookup as the same trie without a cache does, after any mix of updates,
 * clears, budget changes and evictions; an update leaves the cached topics
 * its filter cannot match alone; and, under threads, no reader sees an
 * answer older than one it or a finished update already showed it.
 */
#include <pthread.h>
#include <sched.h>

#include "unit.h"

static const char *const WORDS[] = {"a", "b", "c", "$s"};

static void random_text(char *out, size_t cap, unsigned *seed, int pattern, const cst_dialect *d)
{
    size_t n = 1 + (size_t)(rand_r(seed) % 3), used = 0;
    out[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const char *w = WORDS[rand_r(seed) % 4];
        int roll = rand_r(seed) % 6;
        if (pattern && roll == 0)
            w = d->single;
        else if (pattern && roll == 1 && i == n - 1)
            w = d->multi;
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? d->sep : "", w);
    }
}

static int same_answer(cst_trie *a, cst_trie *b, const char *topic)
{
    uint64_t *x = NULL, *y = NULL;
    int64_t n = lookup_sorted(a, topic, strlen(topic), &x);
    int64_t m = lookup_sorted(b, topic, strlen(topic), &y);
    int same = n == m && (n <= 0 || memcmp(x, y, (size_t)n * sizeof *x) == 0);
    free(x);
    free(y);
    return same;
}

/* Random updates on a cached trie and a twin without a cache; after each,
 * a few lookups must agree (looked up twice: the second one from the
 * cache).  Small budgets evict; clears and budget changes come now and
 * then. */
static void fuzz_against_twin(const cst_dialect *d, size_t budget, unsigned seed)
{
    cst_trie *cached = cst_new(d), *plain = cst_new(d);
    CHECK_EQ(cst_cache_set(cached, budget), CST_OK);
    char text[64];
    long disagreements = 0;
    for (int step = 0; step < 3000; step++) {
        int roll = rand_r(&seed) % 100;
        random_text(text, sizeof text, &seed, 1, d);
        uint64_t id = 1 + (uint64_t)(rand_r(&seed) % 5);
        if (roll < 45) {
            CHECK_EQ(sub(cached, text, id), sub(plain, text, id));
        } else if (roll < 90) {
            CHECK_EQ(unsub(cached, text, id), unsub(plain, text, id));
        } else if (roll < 92) {
            CHECK_EQ(cst_clear(cached), CST_OK);
            CHECK_EQ(cst_clear(plain), CST_OK);
        } else if (roll < 94) {
            CHECK_EQ(cst_cache_set(cached, (size_t)(rand_r(&seed) % 4) * budget / 2), CST_OK);
        }
        for (int k = 0; k < 4; k++) {
            random_text(text, sizeof text, &seed, 0, d);
            disagreements += !same_answer(cached, plain, text);
            disagreements += !same_answer(cached, plain, text);
        }
    }
    CHECK_EQ(disagreements, 0);
    int64_t st[CST_CACHE_NSTATS];
    CHECK_EQ(cst_cache_stats(cached, st, CST_CACHE_NSTATS), 1);
    CHECK(st[CST_CACHE_HITS] > 0);
    CHECK(st[CST_CACHE_INVALIDATED] > 0);
    CHECK(st[CST_CACHE_BYTES] <= st[CST_CACHE_BUDGET]);
    CHECK_TRIE(cached, 1);
    cst_free(cached);
    cst_free(plain);
}

/* An update elsewhere keeps an entry; one that matches the topic kills it. */
static void precision(void)
{
    cst_trie *t = cst_new(&mqtt);
    CHECK_EQ(cst_cache_set(t, 1 << 16), CST_OK);
    CHECK_EQ(sub(t, "a/+", 1), 1);
    int64_t st[CST_CACHE_NSTATS];
    uint64_t one[] = {1, UINT64_MAX};
    CHECK(lookup_is(t, "a/b", one)); /* a miss: the doorkeeper notes it */
    cst_cache_stats(t, st, CST_CACHE_NSTATS);
    CHECK_EQ(st[CST_CACHE_FILLS], 0);
    CHECK(lookup_is(t, "a/b", one)); /* a miss again: now it is cached */
    CHECK(lookup_is(t, "a/b", one));
    cst_cache_stats(t, st, CST_CACHE_NSTATS);
    CHECK_EQ(st[CST_CACHE_FILLS], 1);
    CHECK_EQ(st[CST_CACHE_HITS], 1);
    CHECK_EQ(sub(t, "a/c", 2), 1);   /* a filter that cannot match a/b */
    CHECK_EQ(sub(t, "+/c", 3), 1);
    CHECK_EQ(sub(t, "$s/#", 4), 1);
    CHECK(lookup_is(t, "a/b", one));
    cst_cache_stats(t, st, CST_CACHE_NSTATS);
    CHECK_EQ(st[CST_CACHE_HITS], 2);
    CHECK_EQ(st[CST_CACHE_INVALIDATED], 0);
    CHECK_EQ(sub(t, "#", 5), 1);     /* matches a/b: the entry dies first */
    cst_cache_stats(t, st, CST_CACHE_NSTATS);
    CHECK_EQ(st[CST_CACHE_INVALIDATED], 1);
    uint64_t both[] = {1, 5, UINT64_MAX};
    CHECK(lookup_is(t, "a/b", both));
    CHECK_EQ(nlook(t, "$s/q/r"), 1); /* '#' matches no $ topic */
    CHECK_EQ(unsub(t, "#", 5), 1);
    /* the empty answer is cached and dies with the first filter for it */
    CHECK_EQ(nlook(t, "x/y"), 0);
    CHECK_EQ(nlook(t, "x/y"), 0);
    CHECK_EQ(sub(t, "x/+", 6), 1);
    CHECK_EQ(nlook(t, "x/y"), 1);
    /* a snapshot has no cache and refuses one */
    cst_trie *s = cst_snapshot(t, 1);
    CHECK_EQ(cst_cache_set(s, 1 << 16), CST_EREADONLY);
    CHECK_EQ(cst_cache_stats(s, st, CST_CACHE_NSTATS), 0);
    cst_free(s);
    CHECK_EQ(cst_cache_set(t, 0), CST_OK);
    cst_cache_stats(t, st, CST_CACHE_NSTATS);
    CHECK_EQ(st[CST_CACHE_BYTES], 0);
    cst_free(t);
}

/* Threads: one writer subscribes ids 1..N on "w/#" in order, then
 * unsubscribes them in order, publishing how far it got after each call
 * returned.  Readers look "w/x" up through the cache.  Each answer must be
 * one state of the writer's sequence: a run lo..hi of ids, holding none
 * unsubscribed before the lookup began, every one subscribed before it
 * began whose unsubscribe had not begun when it ended, and none whose
 * subscribe had not begun when it ended; and no answer of a reader may be
 * older than its previous one (a stale cached answer after a fresher one). */
#define CT_N 400
typedef struct cache_threads {
    cst_trie *t;
    _Atomic int added, removed, stop;
    _Atomic long violations, lookups;
} cache_threads;

static void *ct_writer(void *arg)
{
    cache_threads *s = arg;
    /* the readers first (a lookup each): on a busy machine (sanitizers, 2
     * cores) the writer could otherwise be done before any reader ran */
    while (atomic_load(&s->lookups) < 3)
        sched_yield();
    for (int i = 1; i <= CT_N; i++) {
        sub(s->t, "w/#", (uint64_t)i);
        sub(s->t, "q/#", (uint64_t)i); /* elsewhere: must not disturb w/x */
        /* release: the call returned before a reader reads the count */
        atomic_store_explicit(&s->added, i, memory_order_release);
    }
    for (int i = 1; i <= CT_N; i++) {
        unsub(s->t, "w/#", (uint64_t)i);
        atomic_store_explicit(&s->removed, i, memory_order_release);
    }
    atomic_store_explicit(&s->stop, 1, memory_order_release);
    return NULL;
}

static void *ct_reader(void *arg)
{
    cache_threads *s = arg;
    uint64_t ids[CT_N + 1];
    int lo_seen = 0, hi_seen = 0; /* this reader's latest answer's bounds */
    while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
        /* acquire: pairs with the writer's release after each call */
        int a0 = atomic_load_explicit(&s->added, memory_order_acquire);
        int r0 = atomic_load_explicit(&s->removed, memory_order_acquire);
        int64_t n = cst_lookup(s->t, "w/x", 3, ids, CT_N + 1);
        int a1 = atomic_load_explicit(&s->added, memory_order_acquire);
        int r1 = atomic_load_explicit(&s->removed, memory_order_acquire);
        atomic_fetch_add(&s->lookups, 1);
        if (n < 0 || n > CT_N) {
            atomic_fetch_add(&s->violations, 1);
            continue;
        }
        char seen[CT_N + 2] = {0};
        int lo = CT_N + 1, hi = 0;
        for (int64_t k = 0; k < n; k++) {
            int i = (int)ids[k];
            if (i < 1 || i > CT_N)
                continue;
            seen[i] = 1;
            lo = i < lo ? i : lo;
            hi = i > hi ? i : hi;
        }
        int bad = n > 0 && hi - lo + 1 != n; /* one state: a run of ids */
        for (int i = 1; i <= r0; i++)
            bad |= seen[i];                  /* unsubscribed before it began */
        for (int i = r1 + 2; i <= a0; i++)
            bad |= !seen[i];                 /* subscribed before, unsubscribe not begun after */
        for (int i = a1 + 2; i <= CT_N; i++)
            bad |= seen[i];                  /* subscribe not begun when it ended */
        /* never older than this reader's previous answer */
        if (n > 0) {
            bad |= hi < hi_seen || lo < lo_seen;
            lo_seen = lo;
            hi_seen = hi;
        } else if (a0 == CT_N) {
            lo_seen = hi_seen = CT_N + 1; /* all gone: nothing may come back */
        }
        if (bad)
            atomic_fetch_add(&s->violations, 1);
    }
    return NULL;
}

static void threads(void)
{
    cache_threads s = {.t = cst_new(&mqtt)};
    CHECK_EQ(cst_cache_set(s.t, 1 << 16), CST_OK);
    pthread_t w, r[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&r[i], NULL, ct_reader, &s);
    pthread_create(&w, NULL, ct_writer, &s);
    pthread_join(w, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(r[i], NULL);
    CHECK_EQ(atomic_load(&s.violations), 0);
    CHECK(atomic_load(&s.lookups) > 0);
    CHECK_EQ(nlook(s.t, "w/x"), 0);
    CHECK_EQ(nlook(s.t, "q/x"), CT_N);
    cst_free(s.t);
}

/* Look topic up in cached (warmed: cst_lookup_warm) and plain; 1 when the
 * answers differ. */
static int warm_differs(cst_trie *cached, cst_trie *plain, const char *topic)
{
    static uint64_t a[256], b[256];
    int64_t n = cst_lookup_warm(cached, topic, strlen(topic), a, 256);
    int64_t m = cst_lookup(plain, topic, strlen(topic), b, 256);
    if (n > 0 && n <= 256)
        qsort(a, (size_t)n, sizeof *a, cmp_u64);
    if (m > 0 && m <= 256)
        qsort(b, (size_t)m, sizeof *b, cmp_u64);
    return n != m || (n > 0 && n <= 256 && memcmp(a, b, (size_t)n * sizeof *a) != 0);
}

/* A trie big enough to be warmed (over 50,000 pairs), looked up through
 * cst_lookup_warm with its cache on, beside a twin without one.  After a
 * run of misses a lookup warms its walk before it asks the cache (match.c,
 * cache_misses_in_row); a hit turns that off.  Each round: a run of topics
 * never seen, a hot topic looked up until the cache holds it, an update of
 * it, another run of misses, and the hot topic again - which a lookup that
 * found its entry anywhere an update cannot kill it would answer stale.
 * Then random traffic mixing hot topics, misses and updates.  Every answer
 * the twin's. */
static void warmed_lookups(void)
{
    cst_trie *cached = cst_new(&mqtt), *plain = cst_new(&mqtt);
    CHECK_EQ(cst_cache_set(cached, 1 << 20), CST_OK);
    char p[64], hot[64], deep[200];
    size_t used = (size_t)snprintf(deep, sizeof deep, "w5/5");
    for (int i = 0; i < 40; i++)
        used += (size_t)snprintf(deep + used, sizeof deep - used, "/x");
    for (int i = 0; i < 60000; i++) {
        snprintf(p, sizeof p, "w%d/%d/%s", i % 97, i % 1013, i % 3 ? "x" : "+");
        CHECK_EQ(sub(cached, p, (uint64_t)(i % 4000) + 1), sub(plain, p, (uint64_t)(i % 4000) + 1));
    }
    unsigned seed = 5;
    long differ = 0;
    int fresh = 0;
    for (int round = 0; round < 300; round++) {
        snprintf(hot, sizeof hot, "w%d/%d/x", round % 4, (round / 4) % 4);
        for (int half = 0; half < 2; half++) {
            for (int i = 0; i < 12; i++, fresh++) { /* never seen: misses */
                snprintf(p, sizeof p, "w%d/%d/x", 4 + fresh % 93, 4 + fresh % 1009);
                differ += warm_differs(cached, plain, p);
            }
            /* and a topic deeper than the warm goes (WARM_DEPTH), which
             * "w.../+" patterns never match past its third level */
            differ += warm_differs(cached, plain, deep);
            for (int i = 0; i < (half ? 1 : 4); i++)
                differ += warm_differs(cached, plain, hot);
            if (!half) {
                uint64_t id = 5000 + (uint64_t)(rand_r(&seed) % 50);
                int add = rand_r(&seed) % 2;
                CHECK_EQ(add ? sub(cached, hot, id) : unsub(cached, hot, id),
                         add ? sub(plain, hot, id) : unsub(plain, hot, id));
            }
        }
    }
    for (int step = 0; step < 20000; step++) {
        int roll = rand_r(&seed) % 100;
        int w = roll < 40 ? rand_r(&seed) % 4 : rand_r(&seed) % 97;
        int d = roll < 40 ? rand_r(&seed) % 4 : rand_r(&seed) % 2000;
        snprintf(p, sizeof p, "w%d/%d/x", w, d);
        if (roll >= 97) { /* an update the cached answers of this topic must see */
            uint64_t id = 5000 + (uint64_t)(rand_r(&seed) % 50);
            int add = rand_r(&seed) % 2;
            CHECK_EQ(add ? sub(cached, p, id) : unsub(cached, p, id),
                     add ? sub(plain, p, id) : unsub(plain, p, id));
        }
        differ += warm_differs(cached, plain, p);
    }
    CHECK_EQ(differ, 0);
    int64_t st[CST_CACHE_NSTATS];
    CHECK_EQ(cst_cache_stats(cached, st, CST_CACHE_NSTATS), 1);
    CHECK(st[CST_CACHE_HITS] > 1000);
    CHECK(st[CST_CACHE_MISSES] > 1000);
    cst_free(cached);
    cst_free(plain);
}

void test_cache(void)
{
    precision();
    fuzz_against_twin(&mqtt, 1 << 16, 1);
    fuzz_against_twin(&mqtt, 600, 2); /* a few entries: evictions all along */
    fuzz_against_twin(&amqp, 1 << 16, 3);
    fuzz_against_twin(&amqp, 600, 4);
    threads();
    warmed_lookups();
}
