/*
 * torture_ebr.c - torture of the epoch-based reclamation (ebr.c) alone and of
 * snapshot sharing in the trie.
 *
 *   torture_ebr [writers] [snapshotters] [ebr_readers] [ephemeral_threads] [ops] [seed]
 *               [idle_in_section]
 *
 * idle_in_section=1 is a self-test of this program: the idle thread then
 * sleeps inside an epoch section, which really does stall reclamation, and
 * the run must FAIL (epoch stuck, live allocations growing).
 *
 * Phase 1 - EBR alone: writers swap objects into shared slots and retire the
 *   old ones; readers read every slot inside sections and check each object's
 *   canary (a retired object is poisoned, then freed, when EBR releases it:
 *   an early release shows as a bad canary, or as a report under ASan/TSan).
 *   Short-lived threads come and go meanwhile.  At the end every object ever
 *   allocated has been released exactly once.
 * Phase 2 - snapshot sharing: writers churn a shared trie (and rarely clear
 *   it) while snapshotter threads take read-only snapshots, writable copies,
 *   snapshots of snapshots and clear_take results, keep a few of them alive
 *   for a while (checking that read-only ones never change and that copies
 *   change only by their own writes), and drop them.  Short-lived threads
 *   start, do a few operations and exit, checking that thread records are
 *   recycled (the record index stays below the number of threads that can be
 *   alive at once).  An idle thread does one operation and then sleeps through
 *   the whole phase: it must not stall reclamation (the global epoch keeps
 *   moving and the live allocation count stays bounded).
 * End: everything freed, cst_reclaim() returns 0 and cst_live_allocations()
 *   is back to its starting value.  Exit status 0 only if every check passed.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cstrie.h"
#include "ebr.h"

static _Atomic long g_failures;
#define PROGRAM_NAME "torture_ebr"
#include "support.h"

static int nwriters, nsnappers, nreaders, nephemeral;
static long nops;
static uint64_t seed;

/* A per-thread stream start from the seed and a thread tag, mixed so that
 * nearby seeds and tags give unrelated streams. */
static uint64_t stream(uint64_t tag)
{
    uint64_t st = seed ^ (tag * 0xD1B54A32D192ED03ull);
    return rng_next(&st) ^ rng_next(&st);
}
static int record_bound; /* threads that can hold a record at once */
static _Atomic unsigned max_record_index;

static void note_record_index(void)
{
    ebr_record *rec = ebr_enter();
    if (rec == NULL) {
        FAIL("ebr_enter = NULL");
        return;
    }
    unsigned idx = ebr_record_index(rec);
    ebr_exit(rec);
    unsigned cur = atomic_load(&max_record_index);
    while (idx > cur && !atomic_compare_exchange_weak(&max_record_index, &cur, idx))
        ;
}

/* ------------------------------------------------------------------------
 * Phase 1: EBR alone
 * ---------------------------------------------------------------------- */

#define NSLOTS 64
#define MAGIC UINT64_C(0x5eed5eedc0ffee11)
#define DEAD UINT64_C(0xdeaddeaddeaddead)

typedef struct obj {
    _Atomic uint64_t magic;    /* atomic: the poisoning store may race only with a bug */
    uint64_t val;
    uint64_t inv;
} obj;

static _Atomic(obj *) slots[NSLOTS];
static _Atomic long objs_made, objs_freed;

static obj *obj_new(uint64_t v)
{
    obj *o = malloc(sizeof *o);
    if (o == NULL)
        abort();
    atomic_init(&o->magic, MAGIC);
    o->val = v;
    o->inv = ~v;
    atomic_fetch_add(&objs_made, 1);
    return o;
}

static void obj_release(void *p)
{
    obj *o = p;
    if (atomic_load_explicit(&o->magic, memory_order_relaxed) != MAGIC)
        FAIL("object released twice or corrupted");
    atomic_store_explicit(&o->magic, DEAD, memory_order_relaxed);
    o->val = 0;
    o->inv = 0;
    atomic_fetch_add(&objs_freed, 1);
    free(o);
}

static _Atomic int phase1_stop;

static void *ebr_writer(void *arg)
{
    uint64_t rng = stream(0x100 + (uint64_t)(uintptr_t)arg);
    for (long i = 0; i < nops; i++) {
        ebr_record *rec = ebr_enter();
        if (rec == NULL) {
            FAIL("ebr_enter = NULL");
            break;
        }
        int s = (int)(rng_next(&rng) % NSLOTS);
        obj *n = obj_new(rng_next(&rng));
        /* acq_rel: publishes n (release) and reads the old object (acquire). */
        obj *old = atomic_exchange_explicit(&slots[s], n, memory_order_acq_rel);
        if (old)
            ebr_retire(rec, old, obj_release);
        ebr_exit(rec);
    }
    return NULL;
}

static void *ebr_reader(void *arg)
{
    uint64_t rng = stream(0x200 + (uint64_t)(uintptr_t)arg);
    long reads = 0;
    while (!atomic_load(&phase1_stop)) {
        ebr_record *rec = ebr_enter();
        if (rec == NULL) {
            FAIL("ebr_enter = NULL");
            break;
        }
        /* Sometimes a long section over every slot, sometimes a short one. */
        int n = (rng_next(&rng) & 7) == 0 ? NSLOTS * 4 : 4;
        for (int k = 0; k < n; k++) {
            obj *o = atomic_load_explicit(&slots[(size_t)(rng_next(&rng) % NSLOTS)],
                                          memory_order_acquire);
            if (o == NULL)
                continue;
            uint64_t m = atomic_load_explicit(&o->magic, memory_order_relaxed);
            if (m != MAGIC || o->inv != ~o->val)
                FAIL("reader saw a released object (magic %#" PRIx64 ")", m);
            reads++;
        }
        ebr_exit(rec);
        if ((reads & 1023) == 0)
            sched_yield();
    }
    return NULL;
}

static void *ebr_ephemeral(void *arg)
{
    uint64_t rng = stream(0x300 + (uint64_t)(uintptr_t)arg);
    note_record_index();
    for (int i = 0; i < 20; i++) {
        ebr_record *rec = ebr_enter();
        int s = (int)(rng_next(&rng) % NSLOTS);
        obj *old = atomic_exchange_explicit(&slots[s], obj_new(rng_next(&rng)),
                                            memory_order_acq_rel);
        if (old)
            ebr_retire(rec, old, obj_release);
        ebr_exit(rec);
    }
    /* Half detach explicitly, half leave it to the thread-exit destructor. */
    if ((uintptr_t)arg & 1)
        ebr_thread_detach();
    return NULL;
}

static void phase1(void)
{
    double t0 = now_s();
    pthread_t *w = calloc((size_t)nwriters, sizeof *w);
    pthread_t *r = calloc((size_t)nreaders, sizeof *r);
    for (int i = 0; i < nwriters; i++)
        pthread_create(&w[i], NULL, ebr_writer, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < nreaders; i++)
        pthread_create(&r[i], NULL, ebr_reader, (void *)(uintptr_t)(i + 1));
    /* Short-lived threads, four at a time. */
    for (int i = 0; i < nephemeral; i += 4) {
        pthread_t e[4];
        int n = nephemeral - i < 4 ? nephemeral - i : 4;
        for (int k = 0; k < n; k++)
            pthread_create(&e[k], NULL, ebr_ephemeral, (void *)(uintptr_t)(1000 + i + k));
        for (int k = 0; k < n; k++)
            pthread_join(e[k], NULL);
    }
    for (int i = 0; i < nwriters; i++)
        pthread_join(w[i], NULL);
    atomic_store(&phase1_stop, 1);
    for (int i = 0; i < nreaders; i++)
        pthread_join(r[i], NULL);
    int64_t pending = -1;
    for (int i = 0; i < 10 && pending != 0; i++)
        pending = ebr_barrier();
    if (pending != 0)
        FAIL("phase 1: ebr_barrier left %" PRId64 " objects pending", pending);
    for (int s = 0; s < NSLOTS; s++) {
        obj *o = atomic_exchange(&slots[s], NULL);
        if (o)
            obj_release(o);
    }
    long made = atomic_load(&objs_made), freed = atomic_load(&objs_freed);
    if (made != freed)
        FAIL("phase 1: %ld objects made, %ld released", made, freed);
    printf("  phase 1 (EBR alone): %ld objects retired and released, %.2f s, epoch %" PRIu64 "\n",
           freed, now_s() - t0, ebr_epoch());
    free(w);
    free(r);
}

/* ------------------------------------------------------------------------
 * Phase 2: snapshot sharing in the trie
 * ---------------------------------------------------------------------- */

static const cst_dialect amqp = {".", 1, "*", 1, "#", 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, {0, 0}, 0};
static cst_trie *shared;
static _Atomic int phase2_stop;
#define NPAT 48
static char patterns[NPAT][32];

static void make_patterns(void)
{
    static const char *w[] = {"a", "b", "c", "*", "#", "dd"};
    uint64_t rng = stream(77);
    for (int i = 0; i < NPAT; i++) {
        int n = 1 + (int)(rng_next(&rng) % 4);
        size_t len = 0;
        for (int k = 0; k < n; k++) {
            const char *x = w[rng_next(&rng) % 6];
            if (k)
                patterns[i][len++] = '.';
            memcpy(patterns[i] + len, x, strlen(x));
            len += strlen(x);
        }
        len += (size_t)snprintf(patterns[i] + len, sizeof patterns[i] - len, ".p%d", i % 7);
        patterns[i][len] = 0;
    }
}

static _Atomic long writer_progress;

static void *trie_writer(void *arg)
{
    uint64_t rng = stream(0x400 + (uint64_t)(uintptr_t)arg);
    for (long i = 0; i < nops && !atomic_load(&phase2_stop); i++) {
        atomic_fetch_add_explicit(&writer_progress, 1, memory_order_relaxed);
        const char *p = patterns[rng_next(&rng) % NPAT];
        uint64_t id = rng_next(&rng) % 40;
        uint64_t r = rng_next(&rng) % 1000;
        int rc;
        if (r < 520)
            rc = cst_subscribe(shared, p, strlen(p), id);
        else if (r < 999)
            rc = cst_unsubscribe(shared, p, strlen(p), id);
        else
            rc = cst_clear(shared);
        if (rc < 0)
            FAIL("writer: update = %d", rc);
    }
    return NULL;
}

typedef struct held {
    cst_trie *t;
    int readonly;
    int64_t len;               /* expected: frozen (read-only) or own writes (copy) */
} held;

static void held_check(held *h, const char *what)
{
    int64_t l = cst_len(h->t);
    if (l != h->len)
        FAIL("%s: len %" PRId64 ", expected %" PRId64 " (a held %s changed)", what, l, h->len,
             h->readonly ? "snapshot" : "copy");
}

static void *snapper(void *arg)
{
    uint64_t rng = stream(0x500 + (uint64_t)(uintptr_t)arg);
    enum { RING = 4 };
    held ring[RING];
    memset(ring, 0, sizeof ring);
    long i = 0;
    while (!atomic_load(&phase2_stop)) {
        int slot = (int)(i++ % RING);
        held *h = &ring[slot];
        if (h->t) {
            held_check(h, "before free");
            cst_free(h->t);
            h->t = NULL;
        }
        uint64_t r = rng_next(&rng) % 100;
        held *other = &ring[(slot + 1) % RING];
        cst_trie *src = NULL;
        if (r < 3) {
            h->t = cst_clear_take(shared);
            h->readonly = 1;
        } else {
            /* Sometimes from another held snapshot or copy (private to us). */
            src = r >= 80 && other->t ? other->t : shared;
            h->readonly = (int)(rng_next(&rng) & 1);
            h->t = cst_snapshot(src, h->readonly);
        }
        if (h->t == NULL) {
            FAIL("snapshot = NULL");
            continue;
        }
        h->len = cst_len(h->t);
        if (h->len < 0)
            FAIL("cst_len = %" PRId64, h->len);
        if (src != NULL && src != shared && h->len != other->len)
            FAIL("snapshot of a held %s: len %" PRId64 " != %" PRId64,
                 other->readonly ? "snapshot" : "copy", h->len, other->len);
        const char *p = patterns[rng_next(&rng) % NPAT];
        uint64_t out[64];
        if (cst_lookup(h->t, "a.b.c.p1", 8, out, 64) < 0)
            FAIL("lookup on a snapshot failed");
        if (!h->readonly) {
            /* A copy changes only by its own writes. */
            int rc = cst_subscribe(h->t, p, strlen(p), 1000 + rng_next(&rng) % 10);
            if (rc < 0)
                FAIL("copy: subscribe = %d", rc);
            else
                h->len += rc;
            const char *q = patterns[rng_next(&rng) % NPAT];
            rc = cst_unsubscribe(h->t, q, strlen(q), rng_next(&rng) % 40);
            if (rc < 0)
                FAIL("copy: unsubscribe = %d", rc);
            else
                h->len -= rc;
            held_check(h, "copy after its own writes");
        } else if (cst_subscribe(h->t, p, strlen(p), 1) != CST_EREADONLY) {
            FAIL("write to a read-only snapshot accepted");
        }
        for (int k = 0; k < RING; k++)
            if (ring[k].t && ring[k].readonly && (rng_next(&rng) & 3) == 0)
                held_check(&ring[k], "held");
    }
    for (int k = 0; k < RING; k++) {
        if (ring[k].t) {
            held_check(&ring[k], "at end");
            cst_free(ring[k].t);
        }
    }
    return NULL;
}

static void *trie_ephemeral(void *arg)
{
    uintptr_t n = (uintptr_t)arg;
    note_record_index();
    char p[32];
    snprintf(p, sizeof p, "eph.%u.#", (unsigned)(n % 13));
    if (cst_subscribe(shared, p, strlen(p), 5000 + n) < 0)
        FAIL("ephemeral subscribe failed");
    uint64_t out[64];
    if (cst_lookup(shared, "eph.1.x", 7, out, 64) < 0)
        FAIL("ephemeral lookup failed");
    cst_trie *s = cst_snapshot(shared, (int)(n & 1));
    if (s == NULL)
        FAIL("ephemeral snapshot failed");
    cst_free(s);
    if (cst_unsubscribe(shared, p, strlen(p), 5000 + n) < 0)
        FAIL("ephemeral unsubscribe failed");
    if (n & 2)
        cst_thread_detach();
    return NULL;
}

static void *spawner(void *arg)
{
    (void)arg;
    for (int i = 0; i < nephemeral && !atomic_load(&phase2_stop); i += 4) {
        pthread_t e[4];
        int n = nephemeral - i < 4 ? nephemeral - i : 4;
        for (int k = 0; k < n; k++)
            pthread_create(&e[k], NULL, trie_ephemeral, (void *)(uintptr_t)(i + k));
        for (int k = 0; k < n; k++)
            pthread_join(e[k], NULL);
    }
    return NULL;
}

/* The idle thread: one operation, then sleep until told to go. */
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static int idle_state; /* 0 starting, 1 sleeping, 2 go */
static int idle_in_section; /* positive control: the idle thread sleeps INSIDE a section */

static void *idle_thread(void *arg)
{
    (void)arg;
    note_record_index();
    if (cst_subscribe(shared, "idle.x", 6, 1) != 1 || cst_unsubscribe(shared, "idle.x", 6, 1) != 1)
        FAIL("idle thread: its one operation failed");
    ebr_record *held_rec = idle_in_section ? ebr_enter() : NULL;
    pthread_mutex_lock(&idle_mu);
    idle_state = 1;
    pthread_cond_broadcast(&idle_cv);
    while (idle_state != 2)
        pthread_cond_wait(&idle_cv, &idle_mu);
    pthread_mutex_unlock(&idle_mu);
    if (held_rec)
        ebr_exit(held_rec);
    return NULL;
}

static int64_t trie_nodes(cst_trie *t)
{
    cst_stats st;
    if (cst_stats_get(t, &st) != 0)
        return -1;
    return st.inodes + st.cnodes + st.snodes + st.tnodes + st.lnodes + st.setnodes;
}

static void phase2(void)
{
    double t0 = now_s();
    make_patterns();
    shared = cst_new(&amqp);
    pthread_t idle;
    pthread_create(&idle, NULL, idle_thread, NULL);
    pthread_mutex_lock(&idle_mu);
    while (idle_state != 1)
        pthread_cond_wait(&idle_cv, &idle_mu);
    pthread_mutex_unlock(&idle_mu);

    uint64_t epoch0 = ebr_epoch();
    pthread_t *w = calloc((size_t)nwriters, sizeof *w);
    pthread_t *s = calloc((size_t)nsnappers, sizeof *s);
    pthread_t sp;
    for (int i = 0; i < nwriters; i++)
        pthread_create(&w[i], NULL, trie_writer, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < nsnappers; i++)
        pthread_create(&s[i], NULL, snapper, (void *)(uintptr_t)(i + 1));
    pthread_create(&sp, NULL, spawner, NULL);

    /* Sample the live allocation count while the idle thread sleeps, by the
     * writers' progress.  With reclamation stalled it only grows, with the
     * number of operations.  Working, it has transient peaks (a thread
     * preempted inside a section holds the epoch back for its time slice
     * while the others keep retiring) but keeps coming back down near the
     * trie's size: so the MINIMUM over the last third of the run must stay
     * near the minimum over the first third. */
    int64_t max_early = 0, max_late = 0, min_early = INT64_MAX, min_late = INT64_MAX;
    long samples_early = 0, samples_late = 0;
    long total = (long)nwriters * nops;
    char *joined = calloc((size_t)nwriters, 1);
    for (;;) {
        long prog = atomic_load_explicit(&writer_progress, memory_order_relaxed);
        int64_t live = cst_live_allocations();
        if (prog <= total / 3) {
            max_early = live > max_early ? live : max_early;
            min_early = live < min_early ? live : min_early;
            samples_early++;
        } else if (prog >= 2 * total / 3) {
            max_late = live > max_late ? live : max_late;
            min_late = live < min_late ? live : min_late;
            samples_late++;
        }
        usleep(500);
        int done = 1;
        for (int i = 0; i < nwriters; i++) {
            if (!joined[i] && pthread_tryjoin_np(w[i], NULL) == 0)
                joined[i] = 1;
            done &= joined[i];
        }
        if (done)
            break;
    }
    atomic_store(&phase2_stop, 1);
    for (int i = 0; i < nsnappers; i++)
        pthread_join(s[i], NULL);
    pthread_join(sp, NULL);
    uint64_t epoch1 = ebr_epoch();
    if (epoch1 < epoch0 + 10)
        FAIL("the global epoch moved only %" PRIu64 " -> %" PRIu64
             " while the idle thread slept (reclamation stalled?)",
             epoch0, epoch1);
    /* Bounded: with reclamation stalled the count grows with the number of
     * operations; working, it stays near the size of a few trie versions. */
    if (samples_early > 0 && samples_late > 0 && min_late > 4 * min_early + 50000)
        FAIL("live allocations never came back down while the idle thread slept: minimum %" PRId64
             " over the first third of the run, %" PRId64 " over the last third",
             min_early, min_late);
    char msg[256];
    if (cst_check(shared, 1, msg, sizeof msg) != 0)
        FAIL("cst_check(shared, strict) after phase 2: %s", msg);
    /* The idle thread still sleeps: everything but its own few retired nodes
     * (and what they pin) can be reclaimed now. */
    int64_t pending = cst_reclaim();
    int64_t live = cst_live_allocations();
    int64_t nodes = trie_nodes(shared);
    if (pending != 0)
        FAIL("cst_reclaim() with the idle thread asleep left %" PRId64 " pending", pending);
    /* The idle thread's own retired nodes were retired on a nearly empty
     * trie: they pin almost nothing.  Everything else is the live trie
     * (its nodes, the handle and its token buffer). */
    if (nodes < 0 || live > nodes + 2 + 64)
        FAIL("after churn, with the idle thread asleep: %" PRId64
             " live allocations for a trie of %" PRId64 " nodes",
             live, nodes);
    printf("  phase 2: epoch %" PRIu64 " -> %" PRIu64 "; live allocations min/max %" PRId64
           "/%" PRId64 " over the first third (%ld samples), %" PRId64 "/%" PRId64
           " over the last third (%ld samples); after reclaim %" PRId64 " (trie nodes %" PRId64 ")\n",
           epoch0, epoch1, samples_early ? min_early : 0, max_early, samples_early,
           samples_late ? min_late : 0, max_late, samples_late, live, nodes);
    pthread_mutex_lock(&idle_mu);
    idle_state = 2;
    pthread_cond_broadcast(&idle_cv);
    pthread_mutex_unlock(&idle_mu);
    pthread_join(idle, NULL);
    cst_free(shared);
    shared = NULL;
    printf("  phase 2 (snapshot sharing): %.2f s\n", now_s() - t0);
    free(joined);
    free(w);
    free(s);
}

int main(int argc, char **argv)
{
    nwriters = argc > 1 ? atoi(argv[1]) : 2;
    nsnappers = argc > 2 ? atoi(argv[2]) : 2;
    nreaders = argc > 3 ? atoi(argv[3]) : 2;
    nephemeral = argc > 4 ? atoi(argv[4]) : 64;
    nops = argc > 5 ? atol(argv[5]) : 20000;
    seed = argc > 6 ? strtoull(argv[6], NULL, 0) : (uint64_t)time(NULL);
    idle_in_section = argc > 7 ? atoi(argv[7]) : 0; /* harness self-test only */
    if (nwriters < 1 || nsnappers < 0 || nreaders < 0 || nephemeral < 0 || nops < 1 ||
        nwriters + nsnappers + nreaders > 512) {
        fprintf(stderr, "usage: %s [writers>=1] [snapshotters] [ebr_readers] [ephemeral] [ops] [seed]\n",
                argv[0]);
        return 2;
    }
    printf("torture_ebr: writers=%d snapshotters=%d readers=%d ephemeral=%d ops=%ld seed=%" PRIu64 "\n",
           nwriters, nsnappers, nreaders, nephemeral, nops, seed);
    fflush(stdout);
    /* At most this many threads hold a record at once: phase 1 runs writers,
     * readers and 4 ephemeral threads; phase 2 writers, snapshotters, the idle
     * thread and 4 ephemeral ones; plus the main thread. */
    int p1 = nwriters + nreaders + 4, p2 = nwriters + nsnappers + 1 + 4;
    record_bound = (p1 > p2 ? p1 : p2) + 1;
    int64_t live0 = cst_live_allocations();
    double t0 = now_s();
    phase1();
    phase2();
    int64_t pending = cst_reclaim();
    int64_t live = cst_live_allocations();
    if (pending != 0)
        FAIL("cst_reclaim() left %" PRId64 " objects pending", pending);
    if (live != live0)
        FAIL("leak: %" PRId64 " live allocations, %" PRId64 " at start", live, live0);
    unsigned maxidx = atomic_load(&max_record_index);
    if (maxidx >= (unsigned)record_bound)
        FAIL("thread records not recycled: record index %u with at most %d threads alive",
             maxidx, record_bound);
    long failures = atomic_load(&g_failures);
    printf("torture_ebr: %s in %.2f s: max record index %u (bound %d), %ld failures\n",
           failures ? "FAILED" : "ok", now_s() - t0, maxidx, record_bound, failures);
    return failures ? 1 : 0;
}
