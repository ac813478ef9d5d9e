/*
 * torture_trie.c - multithreaded torture of the cstrie engine.
 *
 *   torture_trie [threads] [ops_per_thread] [key_space] [seed] [hash_mask_hex]
 *                [walk_retries]
 *
 * walk_retries 0 makes every lookup walk of a live trie freeze it and walk the
 * frozen generation (match.c, "One state of the trie for the whole walk").
 * Every trie counts as big (cst_debug_set_warm_pairs(0)), and lookups
 * alternate cst_lookup and cst_lookup_warm, so half of them walk in rounds
 * (match.c, "A walk in rounds") while the other threads update.
 *
 * Two shared tries (AMQP and MQTT) take mixed operations from every thread:
 * subscribe, unsubscribe, lookup, has_subscribers, match, lookup_batch,
 * read-only snapshots (looked up, measured with cst_len, iterated, freed),
 * snapshots of snapshots, writable copies (written to, checked independent),
 * the non-strict invariant checker, and - rarely - clear / clear_take.
 *
 * Every thread owns a disjoint set of subscriber ids, so it knows exactly
 * which of ITS pairs are in each trie (no other thread touches them) and
 * checks every answer against that model: subscribe/unsubscribe return
 * values, the own ids in every lookup/match/batch result, the own pairs of
 * every snapshot, copy and cleared snapshot.  A clear by another thread
 * removes a thread's pairs too: clears are bracketed by two global counters
 * per trie (started/finished), a thread checks only the operations whose
 * window no clear overlapped, and re-reads its pairs after one that did.
 *
 * At the end the main thread checks cst_check(strict) on both tries, that the
 * final contents are exactly the union of the threads' models, frees
 * everything, runs cst_reclaim() and checks that the live allocation count is
 * back to where it started.  Same seed => same per-thread operation sequences.
 * Exit status 0 only when every check passed.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cstrie.h"

#define IDS_PER_THREAD 8
#define NTRIES 2
#define MAX_THREADS 256

static const cst_dialect dialects[NTRIES] = {
    {".", 1, "*", 1, "#", 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, {0, 0}, 0},   /* AMQP */
    {"/", 1, "+", 1, "#", 1, 0, 1, 1, 0, 0, 1, 1, 1, 65535, {0, 0}, 0}, /* MQTT */
};
static const char *dialect_names[NTRIES] = {"amqp", "mqtt"};

static _Atomic long g_failures;
#define PROGRAM_NAME "torture_trie"
#include "support.h"

static _Atomic int g_stop; /* a fatal inconsistency: threads wind down */

/* ------------------------------------------------------------------------
 * Key space: patterns, topics and the pattern x topic match matrix
 * ---------------------------------------------------------------------- */

typedef struct keyspace {
    int npat, ntop;
    char (*pat)[64];
    char (*top)[64];
    unsigned char *match;      /* match[t * npat + p] */
    int *topic_of;             /* a topic matching pattern p (or -1) */
} keyspace;

static keyspace ks[NTRIES];

static void gen_pattern(uint64_t *rng, int dial, char *out, size_t cap)
{
    static const char *amqp_words[] = {"a", "b", "c", "dd", "", "e"};
    static const char *mqtt_words[] = {"a", "b", "c", "$s", "", "dd"};
    const char *sep = dial == 0 ? "." : "/";
    int n = dial == 0 ? (int)(rng_next(rng) % 5) : 1 + (int)(rng_next(rng) % 4);
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *w;
        uint64_t r = rng_next(rng) % 10;
        if (r == 7)
            w = dial == 0 ? "*" : "+";
        else if (r == 8 && (dial == 0 || i == n - 1))
            w = "#";
        else if (dial == 1 && r == 3 && i > 0)
            w = "b"; /* "$s" only as a first word */
        else
            w = dial == 0 ? amqp_words[r % 6] : mqtt_words[r % 6];
        if (i)
            out[len++] = sep[0];
        size_t wl = strlen(w);
        memcpy(out + len, w, wl);
        len += wl;
        out[len] = 0;
        (void)cap;
    }
    /* MQTT: a single empty level is an invalid (empty) filter. */
    if (dial == 1 && len == 0) {
        out[0] = 'a';
        out[1] = 0;
    }
}

/* A topic instantiating pattern p: wildcards replaced by words. */
static void instantiate(uint64_t *rng, int dial, const char *p, char *out)
{
    const cst_dialect *d = &dialects[dial];
    sv *w;
    size_t n = split_words(p, strlen(p), d, &w, d->empty_topic);
    size_t len = 0;
    size_t words_out = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rep = NULL;
        int count = 1;
        if (sv_is(w[i], d->single, d->single_len)) {
            rep = (rng_next(rng) & 1) ? "b" : "zz";
        } else if (sv_is(w[i], d->multi, d->multi_len)) {
            count = (int)(rng_next(rng) % 3); /* zero, one or two words */
            rep = "q";
        }
        for (int c = 0; c < count; c++) {
            if (words_out++)
                out[len++] = d->sep[0];
            if (rep) {
                memcpy(out + len, rep, strlen(rep));
                len += strlen(rep);
            } else {
                memcpy(out + len, w[i].p, w[i].n);
                len += w[i].n;
            }
        }
    }
    out[len] = 0;
    free(w);
    if (dial == 1 && len == 0) {
        out[0] = 'q';
        out[1] = 0;
    }
}

static void build_keyspace(int dial, int npat, uint64_t seed)
{
    keyspace *k = &ks[dial];
    uint64_t rng = seed ^ (0x51ed270b27e1ull * (uint64_t)(dial + 1));
    k->npat = npat;
    k->pat = xcalloc((size_t)npat, sizeof *k->pat);
    /* Distinct patterns (validated by a scratch trie). */
    cst_trie *v = cst_new(&dialects[dial]);
    int i = 0, tries = 0;
    while (i < npat && tries < npat * 1000) {
        tries++;
        char buf[64];
        gen_pattern(&rng, dial, buf, sizeof buf);
        if (cst_validate(v, buf, strlen(buf), 1) < 0)
            continue;
        int dup = 0;
        for (int j = 0; j < i; j++)
            dup |= strcmp(k->pat[j], buf) == 0;
        if (dup) {
            /* Small word alphabets run out of patterns: add a numbered word. */
            size_t l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "%sn%d", l ? dialects[dial].sep : "", i);
            if (cst_validate(v, buf, strlen(buf), 1) < 0)
                continue;
            dup = 0;
            for (int j = 0; j < i; j++)
                dup |= strcmp(k->pat[j], buf) == 0;
            if (dup)
                continue;
        }
        strcpy(k->pat[i++], buf);
    }
    k->npat = i;
    /* Topics: one instance of every pattern, plus as many random ones. */
    k->ntop = 2 * k->npat + 4;
    k->top = xcalloc((size_t)k->ntop, sizeof *k->top);
    int t = 0;
    for (int p = 0; p < k->npat; p++)
        instantiate(&rng, dial, k->pat[p], k->top[t++]);
    while (t < k->ntop) {
        char pbuf[64];
        gen_pattern(&rng, dial, pbuf, sizeof pbuf);
        instantiate(&rng, dial, pbuf, k->top[t]);
        if (t == k->ntop - 1 && dial == 1)
            strcpy(k->top[t], "$s/a");
        if (t == k->ntop - 2 && dial == 0)
            k->top[t][0] = 0; /* the empty AMQP topic */
        if (cst_validate(v, k->top[t], strlen(k->top[t]), 0) >= 0)
            t++;
    }
    k->match = xcalloc((size_t)k->ntop * (size_t)k->npat, 1);
    k->topic_of = xcalloc((size_t)k->npat, sizeof(int));
    for (int p = 0; p < k->npat; p++)
        k->topic_of[p] = -1;
    for (t = 0; t < k->ntop; t++) {
        if (cst_validate(v, k->top[t], strlen(k->top[t]), 0) < 0) {
            fprintf(stderr, "torture_trie: generated invalid topic '%s'\n", k->top[t]);
            abort();
        }
        for (int p = 0; p < k->npat; p++) {
            int m = ref_match(&dialects[dial], k->pat[p], strlen(k->pat[p]), k->top[t], strlen(k->top[t]));
            k->match[(size_t)t * (size_t)k->npat + (size_t)p] = (unsigned char)m;
            if (m && k->topic_of[p] < 0)
                k->topic_of[p] = t;
        }
    }
    cst_free(v);
}

static int pattern_index(int dial, const char *p, size_t len)
{
    keyspace *k = &ks[dial];
    for (int i = 0; i < k->npat; i++)
        if (strlen(k->pat[i]) == len && memcmp(k->pat[i], p, len) == 0)
            return i;
    return -1;
}

/* ------------------------------------------------------------------------
 * Shared state
 * ---------------------------------------------------------------------- */

static cst_trie *shared[NTRIES];
static _Atomic long clears_started[NTRIES], clears_finished[NTRIES];
static int nthreads;
static long ops_per_thread;
static uint64_t seed;

typedef struct worker {
    int id;
    pthread_t th;
    uint64_t rng;
    unsigned char *model[NTRIES]; /* model[d][p * IDS + j] */
    long last_f[NTRIES];          /* clears_finished when the model was last exact */
    long counts[16];
    long resyncs, skipped_checks;
    unsigned long lookups;        /* odd: cst_lookup_warm */
    uint64_t *buf;
    size_t bufcap;
} worker;

static worker *workers;

static uint64_t own_id(int tid, int j) { return ((uint64_t)(tid + 1) << 40) | (uint64_t)(j * 7 + 3); }

static int id_owner(uint64_t id, int *j)
{
    uint64_t t = (id >> 40);
    uint64_t low = id & ((UINT64_C(1) << 40) - 1);
    if (t < 1 || t > (uint64_t)nthreads || low < 3 || (low - 3) % 7 != 0 ||
        (low - 3) / 7 >= IDS_PER_THREAD)
        return -1;
    *j = (int)((low - 3) / 7);
    return (int)t - 1;
}

/* A window of operations that no clear of trie d overlapped. */
typedef struct window {
    long s1, f1;
} window;

static window window_open(int d)
{
    window w;
    w.f1 = atomic_load(&clears_finished[d]);
    w.s1 = atomic_load(&clears_started[d]);
    return w;
}

static int window_clean(int d, window w) { return w.s1 == w.f1 && atomic_load(&clears_started[d]) == w.s1; }

/* Re-read this thread's pairs of trie d until no clear overlaps the read. */
static void resync(worker *me, int d)
{
    keyspace *k = &ks[d];
    me->resyncs++;
    for (;;) {
        window w = window_open(d);
        if (w.s1 != w.f1) {
            sched_yield();
            continue;
        }
        unsigned char *m = me->model[d];
        memset(m, 0, (size_t)k->npat * IDS_PER_THREAD);
        for (int p = 0; p < k->npat; p++) {
            int64_t n = cst_subscribers(shared[d], k->pat[p], strlen(k->pat[p]), me->buf,
                                        me->bufcap);
            if (n < 0 || (size_t)n > me->bufcap) {
                FAIL("resync: cst_subscribers('%s') = %" PRId64, k->pat[p], n);
                continue;
            }
            for (int64_t i = 0; i < n; i++) {
                int j = 0;
                if (id_owner(me->buf[i], &j) == me->id)
                    m[p * IDS_PER_THREAD + j] = 1;
            }
        }
        if (window_clean(d, w)) {
            me->last_f[d] = w.f1;
            return;
        }
    }
}

/* At the start of a clean window: clears that completed since the model was
 * last exact removed every pair of ours. */
static void apply_clears(worker *me, int d, window w)
{
    if (w.f1 != me->last_f[d]) {
        memset(me->model[d], 0, (size_t)ks[d].npat * IDS_PER_THREAD);
        me->last_f[d] = w.f1;
    }
}

/* The own ids (bitmask over j) expected in a lookup of topic t. */
static unsigned expected_own(worker *me, int d, int t)
{
    keyspace *k = &ks[d];
    unsigned mask = 0;
    for (int p = 0; p < k->npat; p++)
        if (k->match[(size_t)t * (size_t)k->npat + (size_t)p])
            for (int j = 0; j < IDS_PER_THREAD; j++)
                if (me->model[d][p * IDS_PER_THREAD + j])
                    mask |= 1u << j;
    return mask;
}

/* Own ids (bitmask) in an id list; checks ownership ranges and duplicates. */
static unsigned own_in(worker *me, const uint64_t *ids, size_t n, const char *what)
{
    unsigned mask = 0;
    for (size_t i = 0; i < n; i++) {
        int j = 0;
        int o = id_owner(ids[i], &j);
        if (o < 0) {
            FAIL("%s: foreign id %" PRIu64, what, ids[i]);
            continue;
        }
        if (o == me->id) {
            if (mask & (1u << j))
                FAIL("%s: id %" PRIu64 " reported twice", what, ids[i]);
            mask |= 1u << j;
        }
    }
    return mask;
}

static int64_t do_lookup(worker *me, cst_trie *t, const char *topic)
{
    int64_t n = (me->lookups++ & 1 ? cst_lookup_warm : cst_lookup)(t, topic, strlen(topic),
                                                                    me->buf, me->bufcap);
    if (n < 0 || (size_t)n > me->bufcap)
        FAIL("lookup('%s') = %" PRId64, topic, n);
    return n;
}

/* Own pairs of trie t as a model array (via iteration); returns pairs seen. */
static int64_t own_pairs_by_iteration(worker *me, cst_trie *t, int d, unsigned char *out)
{
    keyspace *k = &ks[d];
    memset(out, 0, (size_t)k->npat * IDS_PER_THREAD);
    cst_iter *it = cst_iter_new(t);
    if (it == NULL) {
        FAIL("cst_iter_new failed");
        return -1;
    }
    static _Thread_local char pat[4096];
    static _Thread_local uint64_t ids[97];
    static _Thread_local int64_t pe[7], ie[7];
    cst_chunk g = {pat, sizeof pat, ids, 97, pe, ie, 7, 0, 0, 0, 0, NULL};
    int64_t total = 0;
    for (;;) {
        int r = cst_iter_next(it, &g);
        if (r == 0)
            break;
        if (r < 0) {
            FAIL("cst_iter_next = %d", r);
            break;
        }
        int64_t p0 = 0, i0 = 0;
        for (int gi = 0; gi < r; gi++) {
            int p = pattern_index(d, pat + p0, (size_t)(pe[gi] - p0));
            if (p < 0)
                FAIL("iteration: unknown pattern '%.*s'", (int)(pe[gi] - p0), pat + p0);
            for (int64_t i = i0; i < ie[gi]; i++) {
                total++;
                int j = 0;
                int o = id_owner(ids[i], &j);
                if (o < 0)
                    FAIL("iteration: foreign id %" PRIu64, ids[i]);
                else if (o == me->id && p >= 0) {
                    if (out[p * IDS_PER_THREAD + j])
                        FAIL("iteration: pair ('%s', %" PRIu64 ") twice", k->pat[p], ids[i]);
                    out[p * IDS_PER_THREAD + j] = 1;
                }
            }
            p0 = pe[gi];
            i0 = ie[gi];
        }
    }
    cst_iter_free(it);
    return total;
}

static void compare_models(worker *me, int d, const unsigned char *got, const char *what)
{
    keyspace *k = &ks[d];
    for (int p = 0; p < k->npat; p++)
        for (int j = 0; j < IDS_PER_THREAD; j++)
            if (got[p * IDS_PER_THREAD + j] != me->model[d][p * IDS_PER_THREAD + j])
                FAIL("%s (%s): thread %d pair ('%s', %d): trie %d, model %d", what,
                     dialect_names[d], me->id, k->pat[p], j, got[p * IDS_PER_THREAD + j],
                     me->model[d][p * IDS_PER_THREAD + j]);
}

/* ------------------------------------------------------------------------
 * Operations
 * ---------------------------------------------------------------------- */

enum {
    OP_SUB, OP_UNSUB, OP_LOOKUP, OP_HAS, OP_MATCH, OP_BATCH, OP_SNAP, OP_COPY, OP_CHECK,
    OP_CLEAR, OP_COUNT
};
static const char *op_names[OP_COUNT] = {"subscribe", "unsubscribe", "lookup", "has_subs",
                                         "match",     "batch",       "snapshot", "copy",
                                         "check",     "clear"};

static int pick_op(uint64_t *rng)
{
    uint64_t r = rng_next(rng) % 10000;
    if (r < 3000) return OP_SUB;
    if (r < 5200) return OP_UNSUB;
    if (r < 7600) return OP_LOOKUP;
    if (r < 8200) return OP_HAS;
    if (r < 8700) return OP_MATCH;
    if (r < 9000) return OP_BATCH;
    if (r < 9500) return OP_SNAP;
    if (r < 9800) return OP_COPY;
    if (r < 9996) return OP_CHECK;
    return OP_CLEAR;
}

static void op_update(worker *me, int d, int p, int j, int insert)
{
    keyspace *k = &ks[d];
    cst_trie *t = shared[d];
    uint64_t id = own_id(me->id, j);
    window w = window_open(d);
    int r = insert ? cst_subscribe(t, k->pat[p], strlen(k->pat[p]), id)
                   : cst_unsubscribe(t, k->pat[p], strlen(k->pat[p]), id);
    if (r < 0) {
        FAIL("%s('%s') = %d", insert ? "subscribe" : "unsubscribe", k->pat[p], r);
        return;
    }
    /* Own visibility, right after the update. */
    int64_t n = cst_subscribers(t, k->pat[p], strlen(k->pat[p]), me->buf, me->bufcap);
    unsigned exact = n >= 0 ? own_in(me, me->buf, (size_t)n, "subscribers") : 0;
    int tt = k->topic_of[p];
    unsigned seen = 0;
    if (tt >= 0) {
        int64_t m = do_lookup(me, t, k->top[tt]);
        if (m >= 0)
            seen = own_in(me, me->buf, (size_t)m, "lookup");
    }
    if (!window_clean(d, w)) {
        me->skipped_checks++;
        resync(me, d);
        return;
    }
    apply_clears(me, d, w);
    unsigned char *cell = &me->model[d][p * IDS_PER_THREAD + j];
    int want = insert ? !*cell : *cell;
    if (r != want)
        FAIL("%s(%s '%s', id %d) returned %d, own model says %d", insert ? "subscribe" : "unsubscribe",
             dialect_names[d], k->pat[p], j, r, want);
    *cell = (unsigned char)insert;
    if (((exact >> j) & 1) != (unsigned)insert)
        FAIL("after %s(%s '%s', %d) = %d: cst_subscribers %s the id", insert ? "subscribe" : "unsubscribe",
             dialect_names[d], k->pat[p], j, r, insert ? "misses" : "still has");
    if (tt >= 0) {
        unsigned want_seen = expected_own(me, d, tt);
        if (seen != want_seen)
            FAIL("after %s(%s '%s', %d): lookup('%s') own ids %#x, model %#x",
                 insert ? "subscribe" : "unsubscribe", dialect_names[d], k->pat[p], j,
                 k->top[tt], seen, want_seen);
    }
}

static void op_lookup(worker *me, int d, int tt, int kind)
{
    keyspace *k = &ks[d];
    cst_trie *t = shared[d];
    const char *topic = k->top[tt];
    window w = window_open(d);
    unsigned got = 0;
    int has = -1;
    if (kind == OP_LOOKUP) {
        int64_t n = do_lookup(me, t, topic);
        if (n >= 0) {
            /* whole result: no id twice */
            for (int64_t a = 0; a < n; a++)
                for (int64_t b = a + 1; b < n && b < a + 64; b++)
                    if (me->buf[a] == me->buf[b])
                        FAIL("lookup('%s'): id %" PRIu64 " twice", topic, me->buf[a]);
            got = own_in(me, me->buf, (size_t)n, "lookup");
        }
    } else if (kind == OP_HAS) {
        has = cst_has_subscribers(t, topic, strlen(topic));
        if (has < 0)
            FAIL("has_subscribers('%s') = %d", topic, has);
    } else { /* OP_MATCH */
        static _Thread_local char pat[8192];
        static _Thread_local uint64_t ids[4096];
        static _Thread_local int64_t pe[512], ie[512];
        cst_chunk g = {pat, sizeof pat, ids, 4096, pe, ie, 512, 0, 0, 0, 0, NULL};
        int r = cst_match(t, topic, strlen(topic), &g);
        if (r < 0) {
            FAIL("match('%s') = %d", topic, r);
        } else {
            int64_t p0 = 0, i0 = 0;
            for (int gi = 0; gi < r; gi++) {
                int p = pattern_index(d, pat + p0, (size_t)(pe[gi] - p0));
                if (p < 0 || !k->match[(size_t)tt * (size_t)k->npat + (size_t)p])
                    FAIL("match('%s'): entry '%.*s' does not match", topic,
                         (int)(pe[gi] - p0), pat + p0);
                unsigned own = own_in(me, ids + i0, (size_t)(ie[gi] - i0), "match entry");
                if (p >= 0 && window_clean(d, w)) {
                    unsigned want = 0;
                    for (int j = 0; j < IDS_PER_THREAD; j++)
                        if (me->model[d][p * IDS_PER_THREAD + j])
                            want |= 1u << j;
                    if (w.f1 == me->last_f[d] && own != want)
                        FAIL("match('%s') entry '%s': own %#x, model %#x", topic, k->pat[p], own,
                             want);
                }
                got |= own;
                p0 = pe[gi];
                i0 = ie[gi];
            }
        }
    }
    if (!window_clean(d, w)) {
        me->skipped_checks++;
        resync(me, d);
        return;
    }
    apply_clears(me, d, w);
    unsigned want = expected_own(me, d, tt);
    if (kind == OP_HAS) {
        if (want && has != 1)
            FAIL("has_subscribers(%s '%s') = %d but own ids %#x match", dialect_names[d], topic,
                 has, want);
    } else if (got != want) {
        FAIL("%s(%s '%s'): own ids %#x, model %#x", op_names[kind], dialect_names[d], topic, got,
             want);
    }
}

/*
 * lookup_batch over six random topics with a null row.  A row split over
 * several calls is only stable on a frozen trie (cstrie.h), so on the live
 * trie the capacity holds every row at once, and the small-capacity chunked
 * run goes over a read-only snapshot.
 */
static void op_batch(worker *me, int d)
{
    keyspace *k = &ks[d];
    enum { ROWS = 6 };
    int tt[ROWS];
    char data[ROWS * 64];
    int64_t off[ROWS + 1];
    uint8_t valid = 0;
    size_t pos = 0;
    for (int r = 0; r < ROWS; r++) {
        tt[r] = (int)(rng_next(&me->rng) % (uint64_t)k->ntop);
        off[r] = (int64_t)pos;
        if (r == 2)
            continue; /* a null row */
        valid |= (uint8_t)(1u << r);
        size_t l = strlen(k->top[tt[r]]);
        memcpy(data + pos, k->top[tt[r]], l);
        pos += l;
    }
    off[ROWS] = (int64_t)pos;
    int chunked = (int)(rng_next(&me->rng) & 1);
    size_t cap = chunked ? 5 : ROWS * me->bufcap;
    int8_t status[ROWS];
    unsigned got[ROWS] = {0};
    int64_t *rows = xcalloc(cap, sizeof *rows);
    uint64_t *ids = xcalloc(cap, sizeof *ids);
    int64_t row = 0;
    uint64_t skip = 0;
    window w = window_open(d);
    cst_trie *t = chunked ? cst_snapshot(shared[d], 1) : shared[d];
    int guard = 0;
    while (t && row < ROWS && guard++ < 100000) {
        int64_t nr;
        uint64_t ns;
        size_t need;
        int64_t n = cst_lookup_batch(t, data, off, 1, &valid, 0, ROWS, row, skip, rows, ids, cap,
                                     &nr, &ns, &need, status);
        if (n == CST_ETRUNC && nr >= row && nr < ROWS && need > cap) {
            row = nr;   /* the rows before it had no pairs */
            cap = need; /* that row alone needs more room: grow and ask again */
            rows = xrealloc(rows, cap * sizeof *rows);
            ids = xrealloc(ids, cap * sizeof *ids);
            continue;
        }
        if (n < 0) {
            FAIL("lookup_batch = %" PRId64, n);
            break;
        }
        if (!chunked && nr != ROWS)
            FAIL("lookup_batch: a full-size buffer needed another call");
        for (int64_t i = 0; i < n; i++) {
            int j = 0;
            if (id_owner(ids[i], &j) == me->id) {
                if (got[rows[i]] & (1u << j))
                    FAIL("lookup_batch: (row %" PRId64 ", own id %d) twice", rows[i], j);
                got[rows[i]] |= 1u << j;
            }
        }
        row = nr;
        skip = ns;
    }
    if (t == NULL)
        FAIL("cst_snapshot = NULL");
    if (chunked)
        cst_free(t);
    free(rows);
    free(ids);
    if (status[2] != 1)
        FAIL("lookup_batch: null row status %d", status[2]);
    if (!window_clean(d, w)) {
        me->skipped_checks++;
        resync(me, d);
        return;
    }
    apply_clears(me, d, w);
    for (int r = 0; r < ROWS; r++) {
        if (r == 2)
            continue;
        if (status[r] != 0)
            FAIL("lookup_batch row %d status %d", r, status[r]);
        unsigned want = expected_own(me, d, tt[r]);
        if (got[r] != want)
            FAIL("lookup_batch(%s '%s', %s): own %#x, model %#x", dialect_names[d],
                 k->top[tt[r]], chunked ? "snapshot, chunked" : "live", got[r], want);
    }
}

/* A snapshot (readonly) or copy of shared[d], and this worker's pairs in it
 * as *gotp (npat x IDS_PER_THREAD cells, to free), compared with the model
 * when no clear ran meanwhile; *total gets the number of pairs iterated.
 * NULL (a failure recorded) when the engine is out of memory. */
static cst_trie *snapshot_own(worker *me, int d, int readonly, const char *what,
                              unsigned char **gotp, int64_t *total)
{
    window w = window_open(d);
    cst_trie *s = cst_snapshot(shared[d], readonly);
    if (s == NULL) {
        FAIL("cst_snapshot(%s) = NULL", what);
        return NULL;
    }
    int clean = window_clean(d, w);
    if (!clean) {
        me->skipped_checks++;
        resync(me, d);
    } else {
        apply_clears(me, d, w);
    }
    *gotp = xcalloc((size_t)ks[d].npat * IDS_PER_THREAD, 1);
    *total = own_pairs_by_iteration(me, s, d, *gotp);
    if (clean)
        compare_models(me, d, *gotp, what);
    return s;
}

static void op_snapshot(worker *me, int d)
{
    keyspace *k = &ks[d];
    unsigned char *got;
    int64_t total;
    cst_trie *s = snapshot_own(me, d, 1, "snapshot", &got, &total);
    if (s == NULL)
        return;
    int64_t len = cst_len(s);
    if (len != total)
        FAIL("snapshot: cst_len %" PRId64 " != iterated pairs %" PRId64, len, total);
    /* A snapshot of the snapshot: identical; lookups on it agree. */
    cst_trie *s2 = cst_snapshot(s, 1);
    if (s2 == NULL || cst_len(s2) != len)
        FAIL("snapshot of snapshot differs");
    /* Later writes of ours do not show in the snapshot. */
    int p = (int)(rng_next(&me->rng) % (uint64_t)k->npat);
    int j = (int)(rng_next(&me->rng) % IDS_PER_THREAD);
    op_update(me, d, p, j, !got[p * IDS_PER_THREAD + j]);
    int64_t n = cst_subscribers(s, k->pat[p], strlen(k->pat[p]), me->buf, me->bufcap);
    unsigned own = n >= 0 ? own_in(me, me->buf, (size_t)n, "snapshot subscribers") : 0;
    if (((own >> j) & 1) != got[p * IDS_PER_THREAD + j])
        FAIL("snapshot changed after a write to the live trie (%s '%s', %d)", dialect_names[d],
             k->pat[p], j);
    int tt = (int)(rng_next(&me->rng) % (uint64_t)k->ntop);
    int64_t m = do_lookup(me, s2 ? s2 : s, k->top[tt]);
    if (m >= 0) {
        unsigned seen = own_in(me, me->buf, (size_t)m, "snapshot lookup");
        unsigned want = 0;
        for (int q = 0; q < k->npat; q++)
            if (k->match[(size_t)tt * (size_t)k->npat + (size_t)q])
                for (int jj = 0; jj < IDS_PER_THREAD; jj++)
                    if (got[q * IDS_PER_THREAD + jj])
                        want |= 1u << jj;
        if (seen != want)
            FAIL("snapshot lookup('%s'): own %#x, iterated %#x", k->top[tt], seen, want);
    }
    if (cst_subscribe(s, "a", 1, own_id(me->id, 0)) != CST_EREADONLY)
        FAIL("write to a read-only snapshot did not return CST_EREADONLY");
    char msg[256];
    if (cst_check(s, 0, msg, sizeof msg) != 0)
        FAIL("cst_check(snapshot, 0): %s", msg);
    cst_free(s2);
    cst_free(s);
    free(got);
}

static void op_copy(worker *me, int d)
{
    keyspace *k = &ks[d];
    unsigned char *got;
    int64_t total;
    cst_trie *c = snapshot_own(me, d, 0, "copy", &got, &total);
    if (c == NULL)
        return;
    /* Write our own ids into the copy; the live trie must not see them. */
    for (int i = 0; i < 4; i++) {
        int p = (int)(rng_next(&me->rng) % (uint64_t)k->npat);
        int j = (int)(rng_next(&me->rng) % IDS_PER_THREAD);
        unsigned char *cell = &got[p * IDS_PER_THREAD + j];
        int ins = !*cell;
        uint64_t id = own_id(me->id, j);
        window w2 = window_open(d);
        int r = ins ? cst_subscribe(c, k->pat[p], strlen(k->pat[p]), id)
                    : cst_unsubscribe(c, k->pat[p], strlen(k->pat[p]), id);
        if (r != 1)
            FAIL("copy: %s('%s', %d) = %d", ins ? "subscribe" : "unsubscribe", k->pat[p], j, r);
        *cell = (unsigned char)ins;
        int64_t n = cst_subscribers(shared[d], k->pat[p], strlen(k->pat[p]), me->buf, me->bufcap);
        unsigned live = n >= 0 ? own_in(me, me->buf, (size_t)n, "live subscribers") : 0;
        if (window_clean(d, w2)) {
            apply_clears(me, d, w2);
            if (((live >> j) & 1) != me->model[d][p * IDS_PER_THREAD + j])
                FAIL("a write to a copy changed the live trie (%s '%s', %d)", dialect_names[d],
                     k->pat[p], j);
        } else {
            me->skipped_checks++;
            resync(me, d);
        }
    }
    unsigned char *again = xcalloc((size_t)k->npat * IDS_PER_THREAD, 1);
    total = own_pairs_by_iteration(me, c, d, again);
    if (memcmp(again, got, (size_t)k->npat * IDS_PER_THREAD) != 0)
        FAIL("copy: own pairs differ from the copy's own model");
    if (cst_len(c) != total)
        FAIL("copy: cst_len != iterated pairs");
    char msg[256];
    if (cst_check(c, 0, msg, sizeof msg) != 0)
        FAIL("cst_check(copy, 0): %s", msg);
    cst_free(c);
    free(got);
    free(again);
}

static void op_clear(worker *me, int d)
{
    keyspace *k = &ks[d];
    int take = (int)(rng_next(&me->rng) & 1);
    /* Our own pairs cannot change while we clear, so the taken snapshot's
     * own part is our model (if no other clear ran meanwhile). */
    window w = window_open(d);
    int clean_before = w.s1 == w.f1;
    if (clean_before)
        apply_clears(me, d, w);
    atomic_fetch_add(&clears_started[d], 1);
    cst_trie *s = NULL;
    if (take) {
        s = cst_clear_take(shared[d]);
        if (s == NULL)
            FAIL("cst_clear_take = NULL");
    } else if (cst_clear(shared[d]) != 0) {
        FAIL("cst_clear failed");
    }
    long s_now = atomic_load(&clears_started[d]);
    atomic_fetch_add(&clears_finished[d], 1);
    if (s) {
        unsigned char *got = xcalloc((size_t)k->npat * IDS_PER_THREAD, 1);
        int64_t total = own_pairs_by_iteration(me, s, d, got);
        if (cst_len(s) != total)
            FAIL("clear_take: cst_len != iterated pairs");
        if (clean_before && s_now == w.s1 + 1)
            compare_models(me, d, got, "clear_take");
        cst_free(s);
        free(got);
    }
    resync(me, d);
}

static void *worker_main(void *arg)
{
    worker *me = arg;
    me->bufcap = (size_t)nthreads * IDS_PER_THREAD + 64;
    me->buf = xcalloc(me->bufcap, sizeof *me->buf);
    for (int d = 0; d < NTRIES; d++)
        me->model[d] = xcalloc((size_t)ks[d].npat * IDS_PER_THREAD, 1);
    for (long i = 0; i < ops_per_thread && !atomic_load(&g_stop); i++) {
        int op = pick_op(&me->rng);
        int d = (int)(rng_next(&me->rng) % NTRIES);
        keyspace *k = &ks[d];
        me->counts[op]++;
        switch (op) {
        case OP_SUB:
        case OP_UNSUB: {
            int p = (int)(rng_next(&me->rng) % (uint64_t)k->npat);
            int j = (int)(rng_next(&me->rng) % IDS_PER_THREAD);
            op_update(me, d, p, j, op == OP_SUB);
            break;
        }
        case OP_LOOKUP:
        case OP_HAS:
        case OP_MATCH:
            op_lookup(me, d, (int)(rng_next(&me->rng) % (uint64_t)k->ntop), op);
            break;
        case OP_BATCH:
            op_batch(me, d);
            break;
        case OP_SNAP:
            op_snapshot(me, d);
            break;
        case OP_COPY:
            op_copy(me, d);
            break;
        case OP_CHECK: {
            char msg[256];
            if (cst_check(shared[d], 0, msg, sizeof msg) != 0)
                FAIL("cst_check(live, 0) under load: %s", msg);
            break;
        }
        case OP_CLEAR:
            op_clear(me, d);
            break;
        default:
            break;
        }
        if (atomic_load(&g_failures) > 200)
            atomic_store(&g_stop, 1);
    }
    /* End with an exact model: re-read if a clear is unaccounted for. */
    for (int d = 0; d < NTRIES; d++) {
        window w = window_open(d);
        if (!(w.s1 == w.f1 && w.f1 == me->last_f[d]))
            resync(me, d);
    }
    free(me->buf);
    me->buf = NULL;
    cst_thread_detach();
    return NULL;
}

/* ------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    nthreads = argc > 1 ? atoi(argv[1]) : 4;
    ops_per_thread = argc > 2 ? atol(argv[2]) : 20000;
    int keyspace_size = argc > 3 ? atoi(argv[3]) : 64;
    seed = argc > 4 ? strtoull(argv[4], NULL, 0) : (uint64_t)time(NULL);
    uint64_t mask = argc > 5 ? strtoull(argv[5], NULL, 16) : ~UINT64_C(0);
    int walk_retries = argc > 6 ? atoi(argv[6]) : -1;
    if (nthreads < 1 || nthreads > MAX_THREADS || ops_per_thread < 0 || keyspace_size < 1 ||
        keyspace_size > 4096) {
        fprintf(stderr, "usage: %s [threads 1..%d] [ops_per_thread] [key_space] [seed] [hash_mask_hex] [walk_retries]\n",
                argv[0], MAX_THREADS);
        return 2;
    }
    printf("torture_trie: threads=%d ops/thread=%ld keyspace=%d seed=%" PRIu64 "%s\n", nthreads,
           ops_per_thread, keyspace_size, seed, mask != ~UINT64_C(0) ? " (hash mask set)" : "");
    fflush(stdout);
    int64_t live0 = cst_live_allocations();
    if (mask != ~UINT64_C(0))
        cst_debug_set_hash_mask(mask);
    cst_debug_set_walk_retries(walk_retries);
    cst_debug_set_warm_pairs(0);
    for (int d = 0; d < NTRIES; d++) {
        build_keyspace(d, keyspace_size, seed);
        shared[d] = cst_new(&dialects[d]);
    }
    workers = xcalloc((size_t)nthreads, sizeof *workers);
    double t0 = now_s();
    for (int i = 0; i < nthreads; i++) {
        workers[i].id = i;
        /* Mixed, so that nearby seeds give unrelated streams (a plain
         * seed * golden-ratio start would just shift splitmix64's sequence). */
        uint64_t st = seed ^ ((uint64_t)(i + 1) * 0xD1B54A32D192ED03ull);
        workers[i].rng = rng_next(&st) ^ rng_next(&st);
        if (pthread_create(&workers[i].th, NULL, worker_main, &workers[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(workers[i].th, NULL);
    double dt = now_s() - t0;

    /* Quiescent: strict invariants and exact contents. */
    long total_model = 0;
    for (int d = 0; d < NTRIES; d++) {
        char msg[256];
        if (cst_check(shared[d], 1, msg, sizeof msg) != 0)
            FAIL("final cst_check(%s, strict): %s", dialect_names[d], msg);
        long f_final = atomic_load(&clears_finished[d]);
        long want_pairs = 0;
        for (int i = 0; i < nthreads; i++) {
            worker *w = &workers[i];
            /* a clear after the thread's last exact state removed its pairs */
            if (w->last_f[d] != f_final)
                memset(w->model[d], 0, (size_t)ks[d].npat * IDS_PER_THREAD);
            for (int x = 0; x < ks[d].npat * IDS_PER_THREAD; x++)
                want_pairs += w->model[d][x];
        }
        total_model += want_pairs;
        /* Every pair of the trie is in its owner's model, and vice versa. */
        unsigned char **seen = xcalloc((size_t)nthreads, sizeof *seen);
        for (int i = 0; i < nthreads; i++)
            seen[i] = xcalloc((size_t)ks[d].npat * IDS_PER_THREAD, 1);
        cst_iter *it = cst_iter_new(shared[d]);
        char pat[4096];
        uint64_t ids[1024];
        int64_t pe[64], ie[64];
        cst_chunk g = {pat, sizeof pat, ids, 1024, pe, ie, 64, 0, 0, 0, 0, NULL};
        int64_t npairs = 0;
        int r;
        while (it && (r = cst_iter_next(it, &g)) > 0) {
            int64_t p0 = 0, i0 = 0;
            for (int gi = 0; gi < r; gi++) {
                int p = pattern_index(d, pat + p0, (size_t)(pe[gi] - p0));
                for (int64_t x = i0; x < ie[gi]; x++) {
                    int j = 0;
                    int o = id_owner(ids[x], &j);
                    npairs++;
                    if (p < 0 || o < 0) {
                        FAIL("final %s: unexpected pair ('%.*s', %" PRIu64 ")", dialect_names[d],
                             (int)(pe[gi] - p0), pat + p0, ids[x]);
                        continue;
                    }
                    if (seen[o][p * IDS_PER_THREAD + j]++)
                        FAIL("final %s: pair listed twice", dialect_names[d]);
                    if (!workers[o].model[d][p * IDS_PER_THREAD + j])
                        FAIL("final %s: pair ('%s', thread %d id %d) in the trie, not in the model",
                             dialect_names[d], ks[d].pat[p], o, j);
                }
                p0 = pe[gi];
                i0 = ie[gi];
            }
        }
        cst_iter_free(it);
        for (int i = 0; i < nthreads; i++) {
            for (int x = 0; x < ks[d].npat * IDS_PER_THREAD; x++)
                if (workers[i].model[d][x] && !seen[i][x])
                    FAIL("final %s: pair ('%s', thread %d id %d) in the model, not in the trie",
                         dialect_names[d], ks[d].pat[x / IDS_PER_THREAD], i, x % IDS_PER_THREAD);
            free(seen[i]);
        }
        free(seen);
        if (npairs != want_pairs)
            FAIL("final %s: %" PRId64 " pairs, models hold %ld", dialect_names[d], npairs,
                 want_pairs);
        if (cst_len(shared[d]) != want_pairs)
            FAIL("final %s: cst_len %" PRId64 ", models hold %ld", dialect_names[d],
                 cst_len(shared[d]), want_pairs);
    }
    for (int d = 0; d < NTRIES; d++)
        cst_free(shared[d]);
    int64_t pending = cst_reclaim();
    int64_t live = cst_live_allocations();
    if (pending != 0)
        FAIL("cst_reclaim() left %" PRId64 " objects pending", pending);
    if (live != live0)
        FAIL("leak: %" PRId64 " live allocations, %" PRId64 " at start", live, live0);
    if (mask != ~UINT64_C(0))
        cst_debug_set_hash_mask(~UINT64_C(0));

    long counts[OP_COUNT] = {0}, resyncs = 0, skipped = 0;
    for (int i = 0; i < nthreads; i++) {
        for (int o = 0; o < OP_COUNT; o++)
            counts[o] += workers[i].counts[o];
        resyncs += workers[i].resyncs;
        skipped += workers[i].skipped_checks;
        for (int d = 0; d < NTRIES; d++)
            free(workers[i].model[d]);
    }
    long total_ops = 0;
    for (int o = 0; o < OP_COUNT; o++)
        total_ops += counts[o];
    printf("  ops:");
    for (int o = 0; o < OP_COUNT; o++)
        printf(" %s=%ld", op_names[o], counts[o]);
    printf("\n  clears=%ld/%ld, resyncs=%ld, checks skipped (clear overlap)=%ld, final pairs=%ld\n",
           atomic_load(&clears_finished[0]), atomic_load(&clears_finished[1]), resyncs, skipped,
           total_model);
    for (int d = 0; d < NTRIES; d++) {
        free(ks[d].pat);
        free(ks[d].top);
        free(ks[d].match);
        free(ks[d].topic_of);
    }
    free(workers);
    long failures = atomic_load(&g_failures);
    printf("torture_trie: %s: %ld ops in %.2f s = %.0f ops/s (%d threads, seed %" PRIu64
           "), %ld failures\n",
           failures ? "FAILED" : "ok", total_ops, dt, dt > 0 ? (double)total_ops / dt : 0.0,
           nthreads, seed, failures);
    return failures ? 1 : 0;
}
