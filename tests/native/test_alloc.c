/*
 * test_alloc.c - the allocator (alloc.c): allocation failures injected into
 * every operation (nothing changes, nothing leaks), and the per-thread
 * allocation counters across threads that allocate, free and exit.
 */
#include <pthread.h>

#include "alloc.h"
#include "unit.h"

/* ------------------------------------------------------------------------
 * Out-of-memory injection
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

void test_oom(void)
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
 * Allocation counters
 * ---------------------------------------------------------------------- */

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

void test_alloc_counters(void)
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
