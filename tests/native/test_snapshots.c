/*
 * test_snapshots.c - snapshots and copies (trie.c), clear and clear_take,
 * and cst_len and iteration (walk.c) against a model, with small buffers.
 */
#include "unit.h"

/* ------------------------------------------------------------------------
 * Snapshots and copies
 * ---------------------------------------------------------------------- */

static void fill_small(cst_trie *t, uint64_t base)
{
    const char *ps[] = {"a.b.c", "a.*", "#", "x.y.z.w", "a", "", "q.#.r", "m.n"};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        sub(t, ps[i], base + i);
        sub(t, ps[i], base + 100 + i);
    }
}

void test_snapshots(void)
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
 * clear and clear_take
 * ---------------------------------------------------------------------- */

void test_clear(void)
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
 * cst_len and iteration against a model, with small buffers
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

void test_len_and_iteration(void)
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
