/*
 * scale_engine.c - how the cstrie engine scales with threads, through its
 * public C API only (cstrie.h).
 *
 *   scale_engine [--threads 1,2,4,...] [--seconds S] [--repeat R]
 *                [--rows ROW,...] [--json FILE] [--list]
 *
 * For every row and every thread count n, n pthreads start together on a
 * barrier and each runs its own loop of engine calls until the main thread
 * raises a stop flag `seconds` later.  Printed per (row, n), as a table on
 * stdout and, with --json, as one JSON object per line in FILE:
 *
 *   ops/s         every thread's calls over the wall time of the run
 *                 (first thread's start to last thread's end);
 *   x1            ops/s at n threads / ops/s at 1 thread (same row, same run);
 *   ops/cpu-s     calls per CPU-second: the sum of the threads' calls over
 *                 the sum of their CLOCK_THREAD_CPUTIME_ID;
 *   eff           ops/cpu-s at n / at 1 thread: 1.0 = a thread does as much
 *                 work per CPU-second beside the others as alone; a cache
 *                 line that every thread writes makes it fall, however busy
 *                 or quiet the machine is;
 *   cpu/wall      how many cores the threads really used (n = all of them);
 *   waits/1k      voluntary context switches (getrusage RUSAGE_THREAD) per
 *                 1,000 calls: a thread that went to sleep (a lock, a futex).
 *
 * One op is one engine call: a lookup, a subscribe, an unsubscribe, a
 * snapshot taken and freed, a route.  With --repeat R each (row, n) runs R
 * times, interleaved (1, 2, 4, ..., 1, 2, 4, ...), and the run with the most
 * ops/s is kept.  1 is always measured (the ratios are to it).
 *
 * The data (AMQP dialect; see row_info below for every row):
 *   base      1,024 patterns, subscriber BASE_ID + j for pattern j:
 *             r<a>.w<b>.*, r<a>.#, r<a>.w<b>.x<c> (a = j % 128, b = j % 8,
 *             c = j % 13): ~5 subscribers per topic of the lookup rows;
 *   topics    512 per thread, built by that thread (its own buffers):
 *             r<a>.w<b>.x<c> over the same words, a different order per thread;
 *   updates   256 patterns per thread, <prefix>r<j % 128>.w<j / 128>.*, one
 *             subscriber id per thread; each is subscribed then unsubscribed
 *             (2 ops) in turn.  prefix "" writes the base's own subtrees
 *             (every thread the same patterns), "t<k>." a subtree of thread
 *             k's own, whose first word stays (t<k>.keep is subscribed).
 *
 * Build: make -C stress scale   (-O2 over the engine sources, -Wall -Wextra -Werror)
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cstrie.h"

#define MAX_THREADS 1024
#define MAX_COUNTS 64
#define N_BASE 1024
#define N_TOPICS 512
#define N_UPDATES 256
#define BASE_ID UINT64_C(1000000)
#define OWN_ID UINT64_C(5000000)   /* + thread index: an id no other thread writes */
#define WRITER_ID UINT64_C(7000000)
#define MEMBER_ID UINT64_C(9000000)
#define OUT_CAP 256
#define BATCH 64                   /* calls between two reads of the stop flag */
#define TEXT 48

/* AMQP: "." separator, "*" one word, "#" zero or more words anywhere. */
static const cst_dialect AMQP = {".", 1, "*", 1, "#", 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, {0, 0}, 0};

typedef enum {
    K_LOOKUP,
    K_UPDATE_OWN_TRIE,
    K_UPDATE_DISJOINT,
    K_UPDATE_SAME,
    K_SNAPSHOT,
    K_SNAPSHOT_WRITER,
    K_ROUTE,
    K_MIX
} kind_t;

typedef struct row_info {
    const char *name;
    kind_t kind;
    int locked;       /* every engine call inside one pthread mutex */
    int update_pct;   /* K_MIX: percent of ops that are updates */
    const char *what;
} row_info;

static const row_info ROWS[] = {
    {"lookup", K_LOOKUP, 0, 0,
     "cst_lookup on one shared trie (1,024 base patterns), own topics"},
    {"update-own-trie", K_UPDATE_OWN_TRIE, 0, 0,
     "cst_subscribe + cst_unsubscribe, one trie per thread (base loaded in each)"},
    {"update-disjoint", K_UPDATE_DISJOINT, 0, 0,
     "the same on one shared trie, each thread under its own kept first word t<k>"},
    {"update-same", K_UPDATE_SAME, 0, 0,
     "the same on one shared trie, every thread the same 256 patterns, own id"},
    {"snapshot", K_SNAPSHOT, 0, 0,
     "cst_snapshot(readonly) + cst_free on one shared trie, no writer"},
    {"snapshot-writer", K_SNAPSHOT_WRITER, 0, 0,
     "the same while one extra thread (not counted) subscribes+unsubscribes"},
    {"route", K_ROUTE, 0, 0,
     "cst_route on the base + 128 share groups of 4 members, per-thread pick"},
    {"mix-90-10", K_MIX, 0, 10,
     "one shared trie: 90% cst_lookup, 10% subscribe/unsubscribe under t<k>"},
    {"mix-50-50", K_MIX, 0, 50,
     "the same, 50% lookups, 50% subscribe/unsubscribe"},
    {"locked-lookup", K_LOOKUP, 1, 0, "lookup, every call inside one pthread mutex"},
    {"locked-update-disjoint", K_UPDATE_DISJOINT, 1, 0,
     "update-disjoint, every call inside one pthread mutex"},
    {"locked-update-same", K_UPDATE_SAME, 1, 0,
     "update-same, every call inside one pthread mutex"},
    {"locked-mix-90-10", K_MIX, 1, 10, "mix-90-10, every call inside one pthread mutex"},
    {"locked-mix-50-50", K_MIX, 1, 50, "mix-50-50, every call inside one pthread mutex"},
};
#define N_ROWS ((int)(sizeof ROWS / sizeof ROWS[0]))

/* ------------------------------------------------------------------------ */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("scale_engine: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void check(int64_t rc, const char *what)
{
    if (rc < 0)
        die("%s failed with status %" PRId64, what, rc);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p)
        die("out of memory");
    return p;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long thread_waits(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return ru.ru_nvcsw;
}

typedef struct text {
    char s[TEXT];
    size_t n;
} text;

static void set_text(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_text(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s, sizeof t->s, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof t->s)
        die("text longer than %d bytes (format %s)", TEXT - 1, fmt);
    t->n = (size_t)n;
}

static void load_base(cst_trie *t)
{
    for (int j = 0; j < N_BASE; j++) {
        text p;
        int a = j % 128, b = j % 8, c = j % 13;
        if (j % 3 == 0)
            set_text(&p, "r%d.w%d.*", a, b);
        else if (j % 3 == 1)
            set_text(&p, "r%d.#", a);
        else
            set_text(&p, "r%d.w%d.x%d", a, b, c);
        check(cst_subscribe(t, p.s, p.n, BASE_ID + (uint64_t)j), "cst_subscribe (base)");
    }
}

/* Thread k's topics: words of the base, in an order of its own. */
static void make_topics(text *out, int k)
{
    for (int i = 0; i < N_TOPICS; i++) {
        int j = (int)(((long)i * 7919 + (long)k * 104729) % N_BASE);
        set_text(&out[i], "r%d.w%d.x%d", j % 128, j % 8, i % 13);
    }
}

static void make_updates(text *out, const char *prefix)
{
    for (int j = 0; j < N_UPDATES; j++)
        set_text(&out[j], "%sr%d.w%d.*", prefix, j % 128, j / 128);
}

/* ------------------------------------------------------------------------ */

/* What a run's threads share.  The stop flag, read every BATCH calls, and the
 * locked rows' mutex, written on every call, sit on cache lines of their own. */
typedef struct shared {
    const row_info *row;
    cst_trie *trie;                 /* NULL for update-own-trie */
    pthread_barrier_t start;
    _Atomic int failed;
    _Alignas(64) _Atomic int stop;
    _Alignas(64) pthread_mutex_t lock; /* the locked rows' one lock */
    char pad[64];
} shared;

typedef struct worker {
    shared *sh;
    int k;
    pthread_t tid;
    uint64_t ops;
    double t0, t1, cpu;
    long waits;
} worker;

/* The route rows' pick: members in turn, counted per thread (no shared line). */
static int pick_in_turn(void *arg, uint64_t share, uint64_t n, uint64_t *k)
{
    (void)share;
    uint64_t *next = arg;
    *k = (*next)++ % n;
    return CST_PICK_INDEX;
}

/* One thread's loop state: its trie, topics, update patterns and buffers. */
typedef struct loop {
    shared *sh;
    const row_info *row;
    cst_trie *t;
    text topics[N_TOPICS];
    text updates[N_UPDATES];
    uint64_t out[OUT_CAP];
    uint64_t shares[OUT_CAP];
    uint64_t id;
    uint64_t pick_next;
    uint64_t sink;                  /* results seen (so no call is dead code) */
    int ti, ui, sub_next, acc;
} loop;

static void fail(shared *sh, const char *what, int64_t rc)
{
    if (atomic_exchange(&sh->failed, 1) == 0)
        fprintf(stderr, "scale_engine: %s: %s returned %" PRId64 "\n", sh->row->name, what, rc);
    atomic_store(&sh->stop, 1);
}

static void lock(const loop *L)
{
    if (L->row->locked)
        pthread_mutex_lock(&L->sh->lock);
}

static void unlock(const loop *L)
{
    if (L->row->locked)
        pthread_mutex_unlock(&L->sh->lock);
}

static void op_lookup(loop *L)
{
    const text *x = &L->topics[L->ti];
    lock(L);
    int64_t rc = cst_lookup(L->t, x->s, x->n, L->out, OUT_CAP);
    unlock(L);
    if (rc < 0)
        fail(L->sh, "cst_lookup", rc);
    L->sink += (uint64_t)rc;
    L->ti = (L->ti + 1) % N_TOPICS;
}

/* subscribe the current update pattern, or unsubscribe it and move on */
static void op_update(loop *L)
{
    const text *p = &L->updates[L->ui];
    int rc;
    lock(L);
    if (L->sub_next)
        rc = cst_subscribe(L->t, p->s, p->n, L->id);
    else
        rc = cst_unsubscribe(L->t, p->s, p->n, L->id);
    unlock(L);
    if (rc < 0)
        fail(L->sh, L->sub_next ? "cst_subscribe" : "cst_unsubscribe", rc);
    L->sink += (uint64_t)rc;
    if (!L->sub_next)
        L->ui = (L->ui + 1) % N_UPDATES;
    L->sub_next = !L->sub_next;
}

static void op_snapshot(loop *L)
{
    lock(L);
    cst_trie *s = cst_snapshot(L->t, 1);
    unlock(L);
    if (!s) {
        fail(L->sh, "cst_snapshot", 0);
        return;
    }
    lock(L);
    cst_free(s);
    unlock(L);
    L->sink++;
}

static void op_route(loop *L)
{
    const text *x = &L->topics[L->ti];
    size_t nplain = 0;
    lock(L);
    int64_t rc = cst_route(L->t, x->s, x->n, pick_in_turn, &L->pick_next, L->out, L->shares,
                           OUT_CAP, &nplain);
    unlock(L);
    if (rc < 0)
        fail(L->sh, "cst_route", rc);
    L->sink += (uint64_t)rc + nplain;
    L->ti = (L->ti + 1) % N_TOPICS;
}

static void run_batch(loop *L)
{
    switch (L->row->kind) {
    case K_LOOKUP:
        for (int b = 0; b < BATCH; b++)
            op_lookup(L);
        break;
    case K_UPDATE_OWN_TRIE:
    case K_UPDATE_DISJOINT:
    case K_UPDATE_SAME:
        for (int b = 0; b < BATCH; b++)
            op_update(L);
        break;
    case K_SNAPSHOT:
    case K_SNAPSHOT_WRITER:
        for (int b = 0; b < BATCH; b++)
            op_snapshot(L);
        break;
    case K_ROUTE:
        for (int b = 0; b < BATCH; b++)
            op_route(L);
        break;
    case K_MIX:
        /* exactly update_pct updates in every 100 ops, spread evenly */
        for (int b = 0; b < BATCH; b++) {
            L->acc += L->row->update_pct;
            if (L->acc >= 100) {
                L->acc -= 100;
                op_update(L);
            } else {
                op_lookup(L);
            }
        }
        break;
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    loop *L = xcalloc(1, sizeof *L);
    L->sh = sh;
    L->row = sh->row;
    L->t = sh->trie;
    L->id = OWN_ID + (uint64_t)w->k;
    L->pick_next = (uint64_t)w->k;
    L->sub_next = 1;
    make_topics(L->topics, w->k);
    text prefix;
    set_text(&prefix, "t%d.", w->k);
    kind_t kind = L->row->kind;
    make_updates(L->updates, kind == K_UPDATE_SAME || kind == K_UPDATE_OWN_TRIE ? "" : prefix.s);
    if (kind == K_UPDATE_OWN_TRIE) {
        L->t = cst_new(&AMQP);
        if (!L->t)
            die("cst_new failed");
        load_base(L->t);
    }

    run_batch(L); /* warm-up: code, topics and the trie's paths in this core's caches */
    pthread_barrier_wait(&sh->start);
    uint64_t ops = 0;
    long waits0 = thread_waits();
    double c0 = thread_cpu_s();
    double t0 = mono_s();
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        run_batch(L);
        ops += BATCH;
    }
    double t1 = mono_s();
    w->cpu = thread_cpu_s() - c0;
    w->waits = thread_waits() - waits0;
    w->t0 = t0;
    w->t1 = t1;
    w->ops = ops;

    /* leave the trie as it was: the last pattern may still be subscribed */
    if (!L->sub_next)
        op_update(L);
    if (kind == K_UPDATE_OWN_TRIE)
        cst_free(L->t);
    free(L);
    cst_thread_detach();
    return NULL;
}

/* snapshot-writer's extra thread: subscribe+unsubscribe under its own word. */
typedef struct writer_arg {
    shared *sh;
} writer_arg;

static void *writer_main(void *arg)
{
    shared *sh = ((writer_arg *)arg)->sh;
    text updates[N_UPDATES];
    make_updates(updates, "writer.");
    pthread_barrier_wait(&sh->start);
    int ui = 0;
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        int64_t rc = cst_subscribe(sh->trie, updates[ui].s, updates[ui].n, WRITER_ID);
        if (rc >= 0)
            rc = cst_unsubscribe(sh->trie, updates[ui].s, updates[ui].n, WRITER_ID);
        if (rc < 0)
            fail(sh, "writer update", rc);
        ui = (ui + 1) % N_UPDATES;
    }
    cst_thread_detach();
    return NULL;
}

typedef struct result {
    int n;
    uint64_t ops;
    double wall, cpu, ops_s, ops_cpu, cpu_wall, waits_1k;
} result;

static cst_trie *make_shared_trie(const row_info *row, int n)
{
    cst_trie *t = cst_new(&AMQP);
    if (!t)
        die("cst_new failed");
    load_base(t);
    for (int k = 0; k < n; k++) {
        text p;
        set_text(&p, "t%d.keep", k);
        check(cst_subscribe(t, p.s, p.n, OWN_ID + (uint64_t)k), "cst_subscribe (keep)");
    }
    check(cst_subscribe(t, "writer.keep", 11, WRITER_ID), "cst_subscribe (writer)");
    if (row->kind == K_ROUTE) {
        for (int a = 0; a < 128; a++) {
            text p;
            set_text(&p, "r%d.#", a);
            for (int m = 0; m < 4; m++)
                check(cst_share_subscribe(t, p.s, p.n, 1 + (uint64_t)(a % 4),
                                          MEMBER_ID + (uint64_t)(a * 4 + m)),
                      "cst_share_subscribe");
        }
    }
    return t;
}

static result run_once(const row_info *row, int n, double seconds)
{
    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.row = row;
    atomic_init(&sh.stop, 0);
    atomic_init(&sh.failed, 0);
    pthread_mutex_init(&sh.lock, NULL);
    int writer = row->kind == K_SNAPSHOT_WRITER;
    pthread_barrier_init(&sh.start, NULL, (unsigned)(n + 1 + writer));
    if (row->kind != K_UPDATE_OWN_TRIE)
        sh.trie = make_shared_trie(row, n);
    worker *ws = calloc((size_t)n, sizeof *ws);
    if (!ws)
        die("out of memory");
    for (int k = 0; k < n; k++) {
        ws[k].sh = &sh;
        ws[k].k = k;
        int rc = pthread_create(&ws[k].tid, NULL, worker_main, &ws[k]);
        if (rc != 0)
            die("pthread_create: %s", strerror(rc));
    }
    pthread_t wtid;
    writer_arg wa = {&sh};
    if (writer) {
        int rc = pthread_create(&wtid, NULL, writer_main, &wa);
        if (rc != 0)
            die("pthread_create: %s", strerror(rc));
    }
    pthread_barrier_wait(&sh.start);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    atomic_store(&sh.stop, 1);
    for (int k = 0; k < n; k++)
        pthread_join(ws[k].tid, NULL);
    if (writer)
        pthread_join(wtid, NULL);
    if (atomic_load(&sh.failed))
        exit(1);
    result r = {n, 0, 0, 0, 0, 0, 0, 0};
    double t0 = ws[0].t0, t1 = ws[0].t1;
    long waits = 0;
    for (int k = 0; k < n; k++) {
        r.ops += ws[k].ops;
        r.cpu += ws[k].cpu;
        waits += ws[k].waits;
        if (ws[k].t0 < t0)
            t0 = ws[k].t0;
        if (ws[k].t1 > t1)
            t1 = ws[k].t1;
    }
    r.wall = t1 - t0;
    r.ops_s = r.wall > 0 ? (double)r.ops / r.wall : 0;
    r.ops_cpu = r.cpu > 0 ? (double)r.ops / r.cpu : 0;
    r.cpu_wall = r.wall > 0 ? r.cpu / r.wall : 0;
    r.waits_1k = r.ops ? 1000.0 * (double)waits / (double)r.ops : 0;
    free(ws);
    if (sh.trie)
        cst_free(sh.trie);
    pthread_barrier_destroy(&sh.start);
    pthread_mutex_destroy(&sh.lock);
    cst_reclaim();
    return r;
}

/* ------------------------------------------------------------------------ */

static int parse_counts(const char *s, int *out)
{
    int n = 0;
    char *copy = strdup(s);
    if (!copy)
        die("out of memory");
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v < 1 || v > MAX_THREADS)
            die("bad thread count %s (1..%d)", tok, MAX_THREADS);
        if (n == MAX_COUNTS)
            die("more than %d thread counts", MAX_COUNTS);
        out[n++] = (int)v;
    }
    free(copy);
    return n;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* 1 first, sorted, no duplicates. */
static int normalise_counts(int *c, int n)
{
    c[n++] = 1;
    qsort(c, (size_t)n, sizeof *c, cmp_int);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || c[m - 1] != c[i])
            c[m++] = c[i];
    return m;
}

/* -- the machine's cost of moving a cache line between two cores ----------
 * Two threads pinned to CPUs 0 and 1 hand one line back and forth: the
 * one-way time is what every write to a line the other core holds costs.
 * On a virtual machine it can change between runs (two vCPUs that share a
 * last-level cache, then two that do not): printed before and after the
 * rows, so that a row whose threads share a line can be read against it. */
#define PINGPONG_ROUNDS 200000
static _Alignas(128) _Atomic long pingpong_flag;

static void pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* unpinned if refused */
}

static void *pingpong_other(void *arg)
{
    (void)arg;
    pin_to(1);
    for (long i = 1; i <= PINGPONG_ROUNDS; i++) {
        /* acquire/release: the hand-over itself is what is timed */
        while (atomic_load_explicit(&pingpong_flag, memory_order_acquire) != 2 * i - 1)
            ;
        atomic_store_explicit(&pingpong_flag, 2 * i, memory_order_release);
    }
    return NULL;
}

/* Nanoseconds per one-way transfer, or 0 with fewer than 2 CPUs. */
static double line_transfer_ns(long cpus)
{
    if (cpus < 2)
        return 0;
    pthread_t t;
    atomic_store(&pingpong_flag, 0);
    cpu_set_t saved;
    pthread_getaffinity_np(pthread_self(), sizeof saved, &saved);
    pin_to(0);
    if (pthread_create(&t, NULL, pingpong_other, NULL) != 0)
        die("pthread_create failed");
    double t0 = mono_s();
    for (long i = 1; i <= PINGPONG_ROUNDS; i++) {
        atomic_store_explicit(&pingpong_flag, 2 * i - 1, memory_order_release);
        while (atomic_load_explicit(&pingpong_flag, memory_order_acquire) != 2 * i)
            ;
    }
    double dt = mono_s() - t0;
    pthread_join(t, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    return dt * 1e9 / PINGPONG_ROUNDS / 2;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: scale_engine [--threads 1,2,4,...] [--seconds S] [--repeat R]\n"
            "                    [--rows ROW,...] [--json FILE] [--list]\n"
            "defaults: threads 1, 2, 4, ... up to the CPUs online (and that count),\n"
            "seconds 0.5, repeat 1 (the best ops/s of R runs is kept), every row.\n");
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int main(int argc, char **argv)
{
    int counts[MAX_COUNTS + 1];
    int ncounts = 0;
    double seconds = 0.5;
    int repeat = 1;
    const char *rows_arg = NULL, *json_path = NULL;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        cpus = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--list")) {
            for (int r = 0; r < N_ROWS; r++)
                printf("%-24s %s\n", ROWS[r].name, ROWS[r].what);
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!v) {
            usage(stderr);
            return 2;
        } else if (!strcmp(a, "--threads")) {
            ncounts = parse_counts(v, counts);
            i++;
        } else if (!strcmp(a, "--seconds")) {
            seconds = strtod(v, NULL);
            if (!(seconds > 0 && seconds < 3600))
                die("bad --seconds %s", v);
            i++;
        } else if (!strcmp(a, "--repeat")) {
            repeat = atoi(v);
            if (repeat < 1)
                die("bad --repeat %s", v);
            i++;
        } else if (!strcmp(a, "--rows")) {
            rows_arg = v;
            i++;
        } else if (!strcmp(a, "--json")) {
            json_path = v;
            i++;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (ncounts == 0) {
        for (long c = 1; c <= cpus && ncounts < MAX_COUNTS - 1; c *= 2)
            counts[ncounts++] = (int)c;
        counts[ncounts++] = (int)cpus;
    }
    ncounts = normalise_counts(counts, ncounts);

    int selected[N_ROWS];
    int nsel = 0;
    if (rows_arg) {
        char *copy = strdup(rows_arg);
        if (!copy)
            die("out of memory");
        for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
            int found = -1;
            for (int r = 0; r < N_ROWS; r++)
                if (!strcmp(ROWS[r].name, tok))
                    found = r;
            if (found < 0)
                die("unknown row %s (see --list)", tok);
            selected[nsel++] = found;
        }
        free(copy);
    } else {
        for (int r = 0; r < N_ROWS; r++)
            selected[nsel++] = r;
    }

    FILE *json = NULL;
    if (json_path) {
        json = fopen(json_path, "w");
        if (!json)
            die("cannot write %s: %s", json_path, strerror(errno));
    }
    printf("scale_engine: %ld CPUs online, threads", cpus);
    for (int i = 0; i < ncounts; i++)
        printf("%s%d", i ? "," : " ", counts[i]);
    printf(", %.2f s per run, best of %d; one op = one engine call\n", seconds, repeat);
    double line_before = line_transfer_ns(cpus);
    printf("cache line moved between CPUs 0 and 1: %.1f ns one way\n", line_before);
    printf("%-24s%8s%14s%8s%14s%7s%10s%10s\n", "row", "threads", "ops/s", "x1", "ops/cpu-s",
           "eff", "cpu/wall", "waits/1k");
    fflush(stdout);
    if (json) {
        fprintf(json,
                "{\"meta\": {\"bench\": \"engine\", \"cpus\": %ld, \"seconds\": %g, "
                "\"repeat\": %d, \"line_transfer_ns\": %.1f, \"threads\": [",
                cpus, seconds, repeat, line_before);
        for (int i = 0; i < ncounts; i++)
            fprintf(json, "%s%d", i ? ", " : "", counts[i]);
        fprintf(json, "]}}\n");
        fflush(json);
    }

    for (int s = 0; s < nsel; s++) {
        const row_info *row = &ROWS[selected[s]];
        result best[MAX_COUNTS + 1];
        memset(best, 0, sizeof best);
        for (int rep = 0; rep < repeat; rep++)
            for (int i = 0; i < ncounts; i++) {
                result r = run_once(row, counts[i], seconds);
                if (r.ops_s > best[i].ops_s)
                    best[i] = r;
            }
        for (int i = 0; i < ncounts; i++) {
            const result *r = &best[i];
            double x1 = best[0].ops_s > 0 ? r->ops_s / best[0].ops_s : 0;
            double eff = best[0].ops_cpu > 0 ? r->ops_cpu / best[0].ops_cpu : 0;
            printf("%-24s%8d%14.0f%7.2fx%14.0f%7.2f%10.2f%10.2f\n", row->name, r->n, r->ops_s,
                   x1, r->ops_cpu, eff, r->cpu_wall, r->waits_1k);
            if (json) {
                fprintf(json, "{\"bench\": \"engine\", \"row\": ");
                json_string(json, row->name);
                fprintf(json, ", \"what\": ");
                json_string(json, row->what);
                fprintf(json,
                        ", \"locked\": %s, \"threads\": %d, \"ops\": %" PRIu64
                        ", \"wall_s\": %.6f, \"cpu_s\": %.6f, \"ops_per_s\": %.1f, "
                        "\"ops_per_cpu_s\": %.1f, \"cpu_per_wall\": %.3f, "
                        "\"waits_per_1k\": %.3f, \"speedup\": %.4f, \"efficiency\": %.4f}\n",
                        row->locked ? "true" : "false", r->n, r->ops, r->wall, r->cpu, r->ops_s,
                        r->ops_cpu, r->cpu_wall, r->waits_1k, x1, eff);
            }
        }
        fflush(stdout);
        if (json)
            fflush(json);
    }
    printf("cache line moved between CPUs 0 and 1: %.1f ns one way (after the rows)\n",
           line_transfer_ns(cpus));
    if (json)
        fclose(json);
    return 0;
}
