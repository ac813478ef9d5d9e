/*
 * test_words.c - words and dialects (words.c): forbidden bytes and the word
 * limit, and patterns and topics of tens of thousands of levels through
 * every entry point (nothing may recurse per level on the C stack).
 */
#include "unit.h"

/* ------------------------------------------------------------------------
 * Forbidden bytes and the word limit
 * ---------------------------------------------------------------------- */

/* Forbidden bytes and the word limit (Dialect.forbidden / max_levels): NATS's
 * whitespace set and a 3-word limit, with the codes the binding turns into the
 * validator's messages; nothing changes on an error. */
void test_forbidden_and_max_levels(void)
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
 * Hostile input: deep patterns and topics through every entry point
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

void test_deep_levels(void)
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
