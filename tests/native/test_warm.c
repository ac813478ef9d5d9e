/*
 * test_warm.c - warming a batch (cst_warm, match.c "Warming a batch") and
 * walking in rounds (cst_lookup_warm, cst_lookup_many: "A walk in rounds").
 * Warming only prefetches, so every lookup after it answers as a trie never
 * warmed does; the rounds answer as match_walk does, one topic or a batch,
 * whatever the trie holds (hash-collision chains, L-nodes, tombs, '$'
 * words, deep and invalid topics) and while another thread updates it; a
 * hostile trie cannot grow a frontier past its bound; both are wanted only
 * once the engine holds more bytes than caches do; and the Spark path's
 * rows answer as those lookups do, split between calls or whole.
 */
#include <pthread.h>

#include "unit.h"

static const char *const WORDS[] = {"a", "b", "c", "d", "$s"};

static void random_text(char *out, size_t cap, unsigned *seed, int pattern, const cst_dialect *d,
                        size_t max_words)
{
    size_t n = (size_t)(rand_r(seed) % (int)max_words), used = 0;
    out[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const char *w = WORDS[rand_r(seed) % 5];
        int roll = rand_r(seed) % 6;
        if (pattern && roll == 0)
            w = d->single;
        else if (pattern && roll == 1 && (i == n - 1 || d->multi_min == 0))
            w = d->multi;
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? d->sep : "", w);
    }
}

/* Warm a random batch of topics (some invalid, some deeper than the warmed
 * levels, sometimes more than CST_WARM_TOPICS), then check each against
 * the twin that is never warmed. */
static long warm_and_compare(cst_trie *t, cst_trie *twin, const cst_dialect *d, unsigned *seed)
{
    enum { K = CST_WARM_TOPICS + 4 };
    static char texts[K][400];
    const char *s[K];
    size_t lens[K];
    size_t k = (size_t)(rand_r(seed) % (K + 1));
    for (size_t j = 0; j < k; j++) {
        int roll = rand_r(seed) % 10;
        if (roll == 0)
            snprintf(texts[j], sizeof texts[j], "a%sb%s", d->sep, d->single); /* invalid */
        else
            random_text(texts[j], sizeof texts[j], seed, 0, d, roll == 1 ? 40 : 6);
        s[j] = texts[j];
        lens[j] = strlen(texts[j]);
    }
    CHECK_EQ(cst_warm(t, s, lens, k), 0);
    long differ = 0;
    int64_t first_err = 0; /* the first invalid topic's code */
    for (size_t j = 0; j < k; j++) {
        uint64_t *x = NULL, *y = NULL;
        int64_t n = lookup_sorted(t, s[j], lens[j], &x);
        int64_t m = lookup_sorted(twin, s[j], lens[j], &y);
        differ += !(n == m && (n <= 0 || memcmp(x, y, (size_t)n * sizeof *x) == 0));
        if (first_err == 0 && m < 0)
            first_err = m;
        /* one topic in rounds (every trie counts as big here) */
        static uint64_t one[512];
        int64_t r = cst_lookup_warm(t, s[j], lens[j], one, 512);
        if (r > 0)
            qsort(one, (size_t)r, sizeof *one, cmp_u64);
        differ += !(r == m && (r <= 0 || memcmp(one, y, (size_t)r * sizeof *y) == 0));
        free(x);
        free(y);
    }
    /* the batch in the same rounds: each topic's answer in its slice */
    static uint64_t all[8192];
    size_t ends[K];
    int64_t total = cst_lookup_many(t, s, lens, k, all, 8192, ends);
    if (k == 0 || k > CST_WARM_TOPICS) {
        CHECK_EQ(total, CST_EINVAL);
        return differ;
    }
    if (first_err != 0) {
        CHECK_EQ(total, first_err);
        return differ;
    }
    CHECK(total >= 0 && total <= 8192 && ends[k - 1] == (size_t)total);
    for (size_t j = 0, from = 0; j < k && total >= 0; from = ends[j++]) {
        uint64_t *y = NULL;
        int64_t m = lookup_sorted(twin, s[j], lens[j], &y);
        size_t got = ends[j] - from;
        qsort(all + from, got, sizeof *all, cmp_u64);
        differ += !(m == (int64_t)got && (got == 0 || memcmp(all + from, y, got * sizeof *y) == 0));
        free(y);
    }
    /* with too little room, or none (a NULL buffer: counts only): the
     * total and the ends all the same */
    size_t ends2[K];
    if (total > 0) {
        CHECK_EQ(cst_lookup_many(t, s, lens, k, all, (size_t)total - 1, ends2), total);
        CHECK(memcmp(ends, ends2, k * sizeof *ends) == 0);
    }
    CHECK_EQ(cst_lookup_many(t, s, lens, k, NULL, 0, ends2), total);
    CHECK(memcmp(ends, ends2, k * sizeof *ends) == 0);
    return differ;
}

static void against_twin(const cst_dialect *d, uint64_t hash_mask, unsigned seed)
{
    cst_debug_set_hash_mask(hash_mask); /* narrow masks: collision chains, L-nodes */
    cst_debug_set_warm_pairs(0);        /* every trie walks in rounds */
    cst_trie *t = cst_new(d), *twin = cst_new(d);
    char text[400];
    long differ = 0;
    for (int step = 0; step < 2000; step++) {
        random_text(text, sizeof text, &seed, 1, d, 7);
        uint64_t id = 1 + (uint64_t)(rand_r(&seed) % 6);
        if (rand_r(&seed) % 100 < 55)
            CHECK_EQ(sub(t, text, id), sub(twin, text, id));
        else /* removals leave tombs and contract levels */
            CHECK_EQ(unsub(t, text, id), unsub(twin, text, id));
        if (step % 10 == 0)
            differ += warm_and_compare(t, twin, d, &seed);
    }
    CHECK_EQ(differ, 0);
    cst_debug_set_hash_mask(~UINT64_C(0));
    cst_debug_set_warm_pairs(-1);
    cst_free(t);
    cst_free(twin);
}

/* '+' (or '*') at each of 16 levels and a literal at each: a topic of 16
 * words reaches 2^16 nodes breadth first; the frontier stops at its bound
 * (a buffer overrun here, under ASan, without it). */
static void hostile_frontier(void)
{
    cst_trie *t = cst_new(&mqtt);
    char p[200];
    for (int mask = 0; mask < 1 << 10; mask++) {
        size_t used = 0;
        for (int i = 0; i < 16; i++)
            used += (size_t)snprintf(p + used, sizeof p - used, "%s%s", i ? "/" : "",
                                     i < 10 && (mask >> i & 1) ? "+" : "w");
        CHECK_EQ(sub(t, p, 1), 1);
    }
    const char *s[CST_WARM_TOPICS];
    size_t lens[CST_WARM_TOPICS];
    const char *topic = "w/w/w/w/w/w/w/w/w/w/w/w/w/w/w/w";
    for (int j = 0; j < CST_WARM_TOPICS; j++) {
        s[j] = topic;
        lens[j] = strlen(topic);
    }
    CHECK_EQ(cst_warm(t, s, lens, CST_WARM_TOPICS), 0);
    CHECK_EQ(nlook(t, topic), 1);
    /* the rounds outgrow their frontier: each topic is walked alone */
    cst_debug_set_warm_pairs(0);
    uint64_t out[64];
    size_t ends[CST_WARM_TOPICS];
    CHECK_EQ(cst_lookup_warm(t, topic, strlen(topic), out, 64), 1);
    CHECK_EQ(cst_lookup_many(t, s, lens, CST_WARM_TOPICS, out, 64, ends), CST_WARM_TOPICS);
    CHECK_EQ(ends[CST_WARM_TOPICS - 1], CST_WARM_TOPICS);
    cst_debug_set_warm_pairs(-1);
    cst_free(t);
}

/* Warming while another thread subscribes and unsubscribes: the nodes it
 * reads may be replaced and freed meanwhile (read sections keep them). */
typedef struct warm_threads {
    cst_trie *t;
    _Atomic int stop;
    _Atomic long warms;
} warm_threads;

static void *wt_writer(void *arg)
{
    warm_threads *s = arg;
    unsigned seed = 7;
    char text[64];
    for (int i = 0; i < 40000; i++) {
        random_text(text, sizeof text, &seed, 1, &mqtt, 5);
        if (rand_r(&seed) % 2)
            sub(s->t, text, 1 + (uint64_t)(i % 3));
        else
            unsub(s->t, text, 1 + (uint64_t)(i % 3));
    }
    atomic_store(&s->stop, 1);
    return NULL;
}

static void *wt_warmer(void *arg)
{
    warm_threads *s = arg;
    unsigned seed = 11;
    static _Thread_local char texts[CST_WARM_TOPICS][64];
    const char *p[CST_WARM_TOPICS];
    size_t lens[CST_WARM_TOPICS];
    while (!atomic_load(&s->stop)) {
        for (int j = 0; j < CST_WARM_TOPICS; j++) {
            random_text(texts[j], sizeof texts[j], &seed, 0, &mqtt, 5);
            p[j] = texts[j];
            lens[j] = strlen(texts[j]);
        }
        if (cst_warm(s->t, p, lens, CST_WARM_TOPICS) != 0)
            abort();
        /* and the same topics walked in rounds, alone and together */
        static _Thread_local uint64_t out[4096];
        size_t ends[CST_WARM_TOPICS];
        int64_t one = cst_lookup_warm(s->t, p[0], lens[0], out, 4096);
        int64_t all = cst_lookup_many(s->t, p, lens, CST_WARM_TOPICS, out, 4096, ends);
        /* an empty topic is invalid in MQTT: its code, else an answer */
        if (one == CST_ENOMEM || all == CST_ENOMEM || (one < 0 && one != CST_EEMPTY) ||
            (all < 0 && all != CST_EEMPTY))
            abort();
        atomic_fetch_add(&s->warms, 1);
    }
    cst_thread_detach();
    return NULL;
}

static void under_updates(void)
{
    cst_debug_set_warm_pairs(0);
    warm_threads s = {.t = cst_new(&mqtt)};
    pthread_t w, r[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&r[i], NULL, wt_warmer, &s);
    pthread_create(&w, NULL, wt_writer, &s);
    pthread_join(w, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    CHECK(atomic_load(&s.warms) > 0);
    CHECK(cst_check(s.t, 1, NULL, 0) == 0);
    cst_debug_set_warm_pairs(-1);
    cst_free(s.t);
}

/* cst_lookup_batch (the Spark path) walks a big trie's rows as
 * cst_lookup_warm walks a topic: each row's ids come in the order of that
 * lookup's answer, on a live trie (rows whole) and on a snapshot that splits
 * rows between calls (a few ids a call: the rest resumes with skip), so a
 * split row is delivered exactly once whichever walk it took. */
static void batch_rows_as_lookups(const cst_dialect *d, uint64_t hash_mask, unsigned seed)
{
    enum { ROWS = 80, PATTERNS = 700 };
    cst_debug_set_hash_mask(hash_mask);
    cst_debug_set_warm_pairs(0); /* every trie is big */
    cst_trie *t = cst_new(d);
    char text[400];
    for (int i = 0; i < PATTERNS; i++) {
        random_text(text, sizeof text, &seed, 1, d, 6);
        (void)sub(t, text, 1 + (uint64_t)(rand_r(&seed) % 40)); /* some are invalid */
    }
    static char data[ROWS * 128];
    int64_t offs[ROWS + 1];
    size_t used = 0;
    for (int r = 0; r < ROWS; r++) {
        offs[r] = (int64_t)used;
        if (r == 7) /* invalid in a topic */
            used += (size_t)snprintf(data + used, sizeof data - used, "a%s%s", d->sep, d->multi);
        else if (r == 9 || r == 40) /* deeper than the rounds take: walked alone */
            for (int w = 0; w < 40; w++)
                used += (size_t)snprintf(data + used, sizeof data - used, "%s%s", w ? d->sep : "",
                                         WORDS[w % 2]);
        else
            random_text(data + used, sizeof data - used, &seed, 0, d, 7), used += strlen(data + used);
    }
    offs[ROWS] = (int64_t)used;
    cst_trie *snap = cst_snapshot(t, 1);
    cst_trie *handles[2] = {t, snap};
    size_t caps[2] = {1 << 14, 5};
    long differ = 0;
    for (int hi = 0; hi < 2; hi++) {
        cst_trie *h = handles[hi];
        size_t cap = caps[hi];
        static int64_t rows[1 << 14];
        static uint64_t ids[1 << 14];
        static uint64_t got[ROWS][512];
        size_t ngot[ROWS] = {0};
        int8_t status[ROWS];
        int64_t row = 0, next_row = 0;
        uint64_t skip = 0, next_skip = 0;
        size_t need = 0;
        for (int calls = 0; row < ROWS && calls < 100000; calls++) {
            int64_t k = cst_lookup_batch(h, data, offs, 1, NULL, 0, ROWS, row, skip, rows, ids, cap,
                                         &next_row, &next_skip, &need, status);
            CHECK(k >= 0);
            if (k < 0)
                break;
            for (int64_t i = 0; i < k; i++)
                if (ngot[rows[i]] < 512)
                    got[rows[i]][ngot[rows[i]]++] = ids[i];
            row = next_row;
            skip = next_skip;
        }
        CHECK_EQ(row, ROWS);
        for (int r = 0; r < ROWS; r++) {
            static uint64_t want[512];
            int64_t n = cst_lookup_warm(h, data + offs[r], (size_t)(offs[r + 1] - offs[r]), want,
                                        512);
            if (n < 0) {
                differ += status[r] != n || ngot[r] != 0;
                continue;
            }
            differ += status[r] != 0 || ngot[r] != (size_t)n ||
                      (n > 0 && memcmp(got[r], want, (size_t)n * sizeof *want) != 0);
        }
    }
    CHECK_EQ(differ, 0);
    cst_debug_set_hash_mask(~UINT64_C(0));
    cst_debug_set_warm_pairs(-1);
    cst_free(snap);
    cst_free(t);
}

/* On for a trie of over 50,000 pairs, whatever else the process holds: a
 * small trie beside a big one is not warmed; a snapshot and a bulk build know
 * their size; a clear forgets it (read again when the trie asked about
 * changes, or every 64 calls). */
/* cst_warm_wanted(t) once it has read t's size again (it does so at least
 * once every 64 calls for the same trie). */
static int ask(const cst_trie *t)
{
    int w = 0;
    for (int i = 0; i < 64; i++)
        w = cst_warm_wanted(t);
    return w;
}

static void wanted_by_size(void)
{
    cst_trie *big = cst_new(&mqtt), *small = cst_new(&mqtt);
    char p[64];
    CHECK_EQ(sub(small, "s/1", 1), 1);
    CHECK_EQ(ask(big), 0);
    for (int i = 0; i < 60000; i++) {
        snprintf(p, sizeof p, "big/%d/%d/x", i % 977, i);
        CHECK_EQ(sub(big, p, (uint64_t)i + 1), 1);
    }
    for (int i = 0; i < 5000; i++) /* removals count too: 55,000 left */
        CHECK_EQ(unsub(big, "big/0/0/x", 1) + (i == 0 ? 0 : 1), 1);
    CHECK_EQ(ask(big), 1);
    CHECK_EQ(ask(small), 0);
    /* a warmed single lookup answers as a plain one */
    static uint64_t a[64], b[64];
    long differ = 0;
    for (int i = 0; i < 3000; i += 7) {
        snprintf(p, sizeof p, "big/%d/%d/x", i % 977, i);
        int64_t n = cst_lookup_warm(big, p, strlen(p), a, 64);
        int64_t m = cst_lookup(big, p, strlen(p), b, 64);
        differ += n != m || (n > 0 && memcmp(a, b, (size_t)n * sizeof *a) != 0) || n != (i != 0);
    }
    CHECK_EQ(differ, 0);
    cst_trie *snap = cst_snapshot(big, 1);
    CHECK_EQ(ask(snap), 1);
    CHECK_EQ(cst_clear(big), CST_OK);
    CHECK_EQ(ask(big), 0);
    CHECK_EQ(ask(snap), 1); /* the snapshot keeps its pairs */
    cst_free(snap);
    cst_free(big);
    cst_free(small);

    /* a topic index's put that replaces a topic's id adds no pair: 60,000
     * puts to one topic leave a one-pair trie */
    cst_trie *ti = cst_new(&mqtt);
    uint64_t old = 0;
    for (uint64_t i = 1; i <= 60000; i++)
        CHECK(cst_topic_put(ti, "a/b", 3, i, &old) >= 0);
    CHECK_EQ(old, 59999);
    CHECK_EQ(ask(ti), 0);
    cst_free(ti);
}

void test_warm(void)
{
    against_twin(&mqtt, ~UINT64_C(0), 1);
    against_twin(&amqp, ~UINT64_C(0), 2);
    against_twin(&mqtt, 0x3, 3);
    against_twin(&amqp, 0x0, 4);
    hostile_frontier();
    under_updates();
    wanted_by_size();
    batch_rows_as_lookups(&mqtt, ~UINT64_C(0), 5);
    batch_rows_as_lookups(&mqtt, 0x3, 6);
    batch_rows_as_lookups(&amqp, ~UINT64_C(0), 7);
}
