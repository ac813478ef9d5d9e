/*
 * test_share_groups.c - share groups (trie.c, match.c): joins and leaves,
 * routes and their pick callback, snapshots and copies of memberships.
 */
#include "unit.h"

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

void test_share_groups(void)
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
