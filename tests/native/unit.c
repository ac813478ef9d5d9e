/*
 * unit.c - the unit tests' harness and helpers (declared in unit.h).
 */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

long g_pass, g_fail;
_Atomic long g_progress;

/* ------------------------------------------------------------------------
 * Dialects
 * ---------------------------------------------------------------------- */

const cst_dialect amqp = {".", 1, "*", 1, "#", 1, /*multi_min*/ 0, /*multi_last_only*/ 0,
                          /*strict*/ 0, /*topic_wildcards*/ 1, /*empty_topic*/ 1,
                          /*empty_words*/ 1, /*dollar*/ 0, /*forbid_nul*/ 0,
                          /*max_bytes*/ 0, /*forbidden*/ {0, 0}, /*max_levels*/ 0};
const cst_dialect mqtt = {"/", 1, "+", 1, "#", 1, 0, 1, 1, 0, 0, 1, 1, 1, 65535, {0, 0}, 0};

/* ------------------------------------------------------------------------
 * Helpers over the engine
 * ---------------------------------------------------------------------- */

int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted lookup result; returns count or < 0.  *out is malloc'ed. */
int64_t lookup_sorted(cst_trie *t, const char *topic, size_t len, uint64_t **out)
{
    size_t cap = 16;
    uint64_t *buf = xcalloc(cap, sizeof *buf);
    int64_t n;
    for (;;) {
        n = cst_lookup(t, topic, len, buf, cap);
        if (n < 0 || (size_t)n <= cap)
            break;
        cap = (size_t)n;
        buf = xrealloc(buf, cap * sizeof *buf);
    }
    if (n > 0)
        qsort(buf, (size_t)n, sizeof *buf, cmp_u64);
    *out = buf;
    return n;
}

int sorted_has_dups(const uint64_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (v[i] == v[i - 1])
            return 1;
    return 0;
}

void pairs_add(pairs *ps, const char *p, size_t plen, uint64_t id)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 64;
        ps->v = xrealloc(ps->v, ps->cap * sizeof *ps->v);
    }
    char *c = xcalloc(plen + 1, 1);
    memcpy(c, p, plen);
    ps->v[ps->n++] = (pair){c, plen, id};
}

int pair_cmp(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    size_t m = x->plen < y->plen ? x->plen : y->plen;
    int c = memcmp(x->pat, y->pat, m);
    if (c)
        return c;
    if (x->plen != y->plen)
        return x->plen < y->plen ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void pairs_sort(pairs *ps)
{
    if (ps->n)
        qsort(ps->v, ps->n, sizeof *ps->v, pair_cmp);
}

void pairs_free(pairs *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        free(ps->v[i].pat);
    free(ps->v);
    memset(ps, 0, sizeof *ps);
}

int pairs_equal(const pairs *a, const pairs *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (pair_cmp(&a->v[i], &b->v[i]) != 0)
            return 0;
    return 1;
}

int pairs_has_dups(const pairs *ps)
{
    for (size_t i = 1; i < ps->n; i++)
        if (pair_cmp(&ps->v[i], &ps->v[i - 1]) == 0)
            return 1;
    return 0;
}

void cbuf_init(cbuf *b, size_t pat_cap, size_t ids_cap, size_t entries_cap)
{
    memset(b, 0, sizeof *b);
    b->g.pat = xcalloc(pat_cap, 1);
    b->g.pat_cap = pat_cap;
    b->g.ids = xcalloc(ids_cap, sizeof(uint64_t));
    b->g.ids_cap = ids_cap;
    b->g.pat_end = xcalloc(entries_cap, sizeof(int64_t));
    b->g.ids_end = xcalloc(entries_cap, sizeof(int64_t));
    b->g.entries_cap = entries_cap;
}

void cbuf_grow(cbuf *b, size_t pat_cap, size_t ids_cap, size_t entries_cap)
{
    if (pat_cap > b->g.pat_cap) {
        b->g.pat = xrealloc(b->g.pat, pat_cap);
        b->g.pat_cap = pat_cap;
    }
    if (ids_cap > b->g.ids_cap) {
        b->g.ids = xrealloc(b->g.ids, ids_cap * sizeof(uint64_t));
        b->g.ids_cap = ids_cap;
    }
    if (entries_cap > b->g.entries_cap) {
        b->g.pat_end = xrealloc(b->g.pat_end, entries_cap * sizeof(int64_t));
        b->g.ids_end = xrealloc(b->g.ids_end, entries_cap * sizeof(int64_t));
        b->g.entries_cap = entries_cap;
    }
}

void cbuf_free(cbuf *b)
{
    free(b->g.pat);
    free(b->g.ids);
    free(b->g.pat_end);
    free(b->g.ids_end);
}

/* Append every (pattern, id) of the entries in g to ps; counts empty entries. */
void chunk_to_pairs(const cst_chunk *g, size_t nentries, pairs *ps, long *empty_entries)
{
    int64_t p0 = 0, i0 = 0;
    for (size_t k = 0; k < nentries; k++) {
        int64_t p1 = g->pat_end[k], i1 = g->ids_end[k];
        if (i1 == i0 && empty_entries)
            (*empty_entries)++;
        for (int64_t i = i0; i < i1; i++)
            pairs_add(ps, g->pat + p0, (size_t)(p1 - p0), g->ids[i]);
        p0 = p1;
        i0 = i1;
    }
}

long g_iter_empty_entries;

/* Every (pattern, id) of t through cst_iter_*, with the given buffer sizes
 * (grown on CST_ETRUNC as the need_* fields ask), sorted. */
pairs content_bufs(cst_trie *t, size_t pat_cap, size_t ids_cap, size_t entries_cap)
{
    pairs ps = {0};
    cst_iter *it = cst_iter_new(t);
    if (it == NULL) {
        ps.err = CST_ENOMEM;
        return ps;
    }
    cbuf b;
    cbuf_init(&b, pat_cap, ids_cap, entries_cap);
    for (;;) {
        int r = cst_iter_next(it, &b.g);
        if (r == CST_ETRUNC) {
            if (b.g.need_pat <= b.g.pat_cap && b.g.need_ids <= b.g.ids_cap &&
                b.g.need_entries <= b.g.entries_cap) {
                ps.err = -100; /* ETRUNC without a bigger need: would loop forever */
                break;
            }
            cbuf_grow(&b, b.g.need_pat, b.g.need_ids, b.g.need_entries);
            continue;
        }
        if (r < 0) {
            ps.err = r;
            break;
        }
        if (r == 0)
            break;
        ps.calls++;
        chunk_to_pairs(&b.g, (size_t)r, &ps, &g_iter_empty_entries);
    }
    cbuf_free(&b);
    cst_iter_free(it);
    pairs_sort(&ps);
    return ps;
}

pairs content(cst_trie *t) { return content_bufs(t, 4096, 4096, 256); }

int64_t live_after_reclaim(void)
{
    cst_reclaim();
    return cst_live_allocations();
}

int sub(cst_trie *t, const char *p, uint64_t id) { return cst_subscribe(t, p, strlen(p), id); }
int unsub(cst_trie *t, const char *p, uint64_t id)
{
    return cst_unsubscribe(t, p, strlen(p), id);
}

uint64_t g_nobuf[1];

int64_t nlook(cst_trie *t, const char *topic)
{
    return cst_lookup(t, topic, strlen(topic), NOBUF);
}

/* Lookup of topic gives exactly the ids listed (terminated by UINT64_MAX). */
int lookup_is(cst_trie *t, const char *topic, const uint64_t *want)
{
    uint64_t *got;
    int64_t n = lookup_sorted(t, topic, strlen(topic), &got);
    size_t wn = 0;
    while (want[wn] != UINT64_MAX)
        wn++;
    uint64_t *w = xcalloc(wn, sizeof *w);
    memcpy(w, want, wn * sizeof *w);
    qsort(w, wn, sizeof *w, cmp_u64);
    int ok = n == (int64_t)wn && (wn == 0 || memcmp(got, w, wn * sizeof *w) == 0);
    if (!ok) {
        fprintf(stderr, "  lookup(%s) = [", topic);
        for (int64_t i = 0; i < n; i++)
            fprintf(stderr, "%s%" PRIu64, i ? "," : "", got[i]);
        fprintf(stderr, "] (n=%" PRId64 "), want [", n);
        for (size_t i = 0; i < wn; i++)
            fprintf(stderr, "%s%" PRIu64, i ? "," : "", w[i]);
        fprintf(stderr, "]\n");
    }
    free(got);
    free(w);
    return ok;
}

/* ------------------------------------------------------------------------
 * Isolated runs
 * ---------------------------------------------------------------------- */

static void *watchdog(void *arg)
{
    int limit = *(int *)arg;
    long last = -1;
    int still = 0;
    for (;;) {
        sleep(1);
        long p = atomic_load_explicit(&g_progress, memory_order_relaxed);
        still = p == last ? still + 1 : 0;
        last = p;
        if (still >= limit) {
            fprintf(stderr, "test_engine: no progress for %d s: livelock/hang in the engine\n",
                    limit);
            _exit(3);
        }
    }
    return NULL;
}

void run_isolated(const char *name, void (*fn)(void), int stall_limit_s)
{
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        g_fail++;
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        g_fail++;
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        g_pass = g_fail = 0;
        static int limit;
        limit = stall_limit_s;
        pthread_t th;
        pthread_create(&th, NULL, watchdog, &limit);
        pthread_detach(th);
        fn();
        long v[2] = {g_pass, g_fail};
        ssize_t w = write(fds[1], v, sizeof v);
        (void)w;
        fflush(stderr);
        _exit(0);
    }
    close(fds[1]);
    long v[2] = {0, 0};
    ssize_t got = 0;
    while (got < (ssize_t)sizeof v) {
        ssize_t r = read(fds[0], (char *)v + got, sizeof v - (size_t)got);
        if (r <= 0)
            break;
        got += r;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got == (ssize_t)sizeof v && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        g_pass += v[0];
        g_fail += v[1];
    } else {
        g_fail++;
        fprintf(stderr, "%s:%d: isolated test '%s' did not finish (%s %d%s)\n", __FILE__,
                __LINE__, name, WIFSIGNALED(status) ? "killed by signal" : "exit code",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                WIFEXITED(status) && WEXITSTATUS(status) == 3
                    ? ": the watchdog saw no progress, the engine hangs"
                    : WIFEXITED(status) && WEXITSTATUS(status) == 1
                          ? ": a sanitizer report (see above)"
                          : "");
    }
}
