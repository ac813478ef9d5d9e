/*
 * test_lookup.c - lookups (match.c): AMQP and MQTT answers against the
 * brute-force reference matcher, has_subscribers, cst_match's chunks and
 * their truncation, cst_subscribers, count-only calls, cst_lookup_batch,
 * each subscriber once in answers of every size, many-level wildcards
 * against long keys, and one state of the trie for a whole walk while a
 * writer moves a subscriber.
 */
#include <pthread.h>

#include "unit.h"

/* ------------------------------------------------------------------------
 * AMQP lookups against the reference matcher
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

void test_amqp_lookup(void)
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
 * MQTT lookups, the $ rule and invalid topics
 * ---------------------------------------------------------------------- */

static const char *mqtt_patterns[] = {
    "#", "+", "+/+", "a/#", "a/+", "$SYS/#", "$SYS/+", "+/b", "/", "a//b", "+/#", "a/b",
    "a", "a/+/#", "+/+/#", "$SYS", "/#", "+/", "a/b/#", "$x/b", "b/$x", "b/+",
};
static const char *mqtt_topics[] = {
    "a", "a/b", "$SYS/x", "$SYS", "a/", "/", "a//b", "$x/b", "b/$x", "a/b/c", "b", "//",
    "$SYS/x/y", "x$/b", "a/$b", "$", "$/a",
};

void test_mqtt_lookup(void)
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
 * has_subscribers
 * ---------------------------------------------------------------------- */

void test_has_subscribers(void)
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
 * cst_match entries and truncation
 * ---------------------------------------------------------------------- */

void test_match_chunk(void)
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
 * cst_subscribers (exact pattern)
 * ---------------------------------------------------------------------- */

void test_subscribers(void)
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
 * cst_lookup_batch
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

void test_lookup_batch(void)
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
 * Count-only calls with a NULL buffer
 * ---------------------------------------------------------------------- */

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

void test_count_only_null_buffer(void)
{
    int64_t start = live_after_reclaim();
    run_isolated("count_only_null_buffer", count_only_null_buffer, 10);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * Each subscriber once, whatever the size of the answer
 * ---------------------------------------------------------------------- */

/* A subscriber on several patterns that match one topic is in its answer
 * once, and the answer's count is the number of distinct subscribers, also
 * when the buffer is too small for them: answers of 1 to ~150 ids (counted
 * with repeats), patterns with 1 to 12 subscribers (inline and in sets),
 * drawn from pools small enough to repeat across patterns. */
void test_answer_each_once(void)
{
    static const char *const pats[] = {"a/b/c", "a/+/c", "+/b/c", "a/b/+", "+/+/c", "+/+/+",
                                       "a/#",   "#",     "a/b/#", "+/#",   "a/+/#", "+/b/#"};
    enum { NPAT = sizeof pats / sizeof *pats };
    uint64_t seed = 0x5eed;
    for (int round = 0; round < 300; round++) {
        cst_trie *t = cst_new(&mqtt);
        uint64_t pool = 1 + rng_next(&seed) % 160; /* ids 1..pool */
        int seen[161] = {0};
        size_t distinct = 0;
        for (int p = 0; p < NPAT; p++) {
            if (rng_next(&seed) % 4 == 0)
                continue;
            int k = 1 + (int)(rng_next(&seed) % 12);
            for (int i = 0; i < k; i++) {
                uint64_t id = 1 + rng_next(&seed) % pool;
                sub(t, pats[p], id);
                if (!seen[id]) {
                    seen[id] = 1;
                    distinct++;
                }
            }
        }
        uint64_t out[200];
        int64_t n = cst_lookup(t, "a/b/c", strlen("a/b/c"), out, 200);
        CHECK_EQ(n, (int64_t)distinct);
        int got[161] = {0};
        for (int64_t i = 0; i < n && i < 200; i++) {
            CHECK(out[i] >= 1 && out[i] <= pool && seen[out[i]]);
            if (out[i] <= pool)
                CHECK_EQ(got[out[i]]++, 0);
        }
        /* a buffer too small (on the heap, its exact size: a write past it
         * is an ASan error): the count still of the distinct ones, and the
         * ids given distinct */
        size_t cap = distinct / 2;
        uint64_t *small = xcalloc(cap ? cap : 1, sizeof *small);
        CHECK_EQ(cst_lookup(t, "a/b/c", strlen("a/b/c"), small, cap), (int64_t)distinct);
        int again[161] = {0};
        for (size_t i = 0; i < cap; i++)
            if (small[i] >= 1 && small[i] <= pool)
                CHECK_EQ(again[small[i]]++, 0);
        free(small);
        cst_free(t);
    }
}

/* ------------------------------------------------------------------------
 * Many-level wildcards against 40-word keys (no exponential blow-up)
 * ---------------------------------------------------------------------- */

void test_multi_wildcards(void)
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
 * One state of the trie for a whole walk
 * ---------------------------------------------------------------------- */

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

void test_walk_one_state(void)
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
