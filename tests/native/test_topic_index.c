/*
 * test_topic_index.c - the topic index (topic_index.c): put, get and remove
 * of literal topics, reverse queries in chunks, counts, and the filters walk
 * over a subscription trie.
 */
#include "unit.h"

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

void test_topic_index(void)
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
