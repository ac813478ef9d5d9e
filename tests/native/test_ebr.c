/*
 * test_ebr.c - reclamation (ebr.c): an idle thread's garbage, prompt
 * reclamation of a dropped trie, and fork() while another thread is inside
 * an engine call.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebr.h"
#include "unit.h"

/* ------------------------------------------------------------------------
 * An idle thread's garbage
 *
 * A thread takes a snapshot of a populated trie; the trie then changes
 * completely; the thread frees its snapshot and goes idle (a Python worker
 * thread that exported a snapshot and now waits for work).  The snapshot was
 * the last holder of the old version, so the whole old version is garbage.
 * Another thread's cst_reclaim() must be able to free it: an idle thread
 * must not keep memory alive indefinitely.
 * ---------------------------------------------------------------------- */

typedef struct idle_ctl {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage;
    cst_trie *t;
} idle_ctl;

static void idle_wait(idle_ctl *c, int stage)
{
    pthread_mutex_lock(&c->mu);
    while (c->stage < stage)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static void idle_go(idle_ctl *c, int stage)
{
    pthread_mutex_lock(&c->mu);
    c->stage = stage;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void *idle_snapshot_thread(void *arg)
{
    idle_ctl *c = arg;
    cst_trie *snap = cst_snapshot(c->t, 1);
    idle_go(c, 1);
    idle_wait(c, 2);
    cst_free(snap); /* the last reference to the old version */
    idle_go(c, 3);
    idle_wait(c, 4); /* idle */
    return NULL;
}

void test_idle_thread_garbage(void)
{
    int64_t start = live_after_reclaim();
    enum { N = 5000 };
    idle_ctl c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, cst_new(&amqp)};
    char buf[32];
    for (int i = 0; i < N; i++) {
        int l = snprintf(buf, sizeof buf, "k%d.x", i);
        cst_subscribe(c.t, buf, (size_t)l, 1);
    }
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, idle_snapshot_thread, &c), 0);
    idle_wait(&c, 1);
    for (int i = 0; i < N; i++) {
        int l = snprintf(buf, sizeof buf, "k%d.x", i);
        cst_unsubscribe(c.t, buf, (size_t)l, 1);
    }
    idle_go(&c, 2);
    idle_wait(&c, 3);
    /* The other thread is idle now; reclaim from here. */
    int64_t pending = cst_reclaim();
    int64_t live = cst_live_allocations() - start;
    cst_stats st;
    CHECK_EQ(cst_stats_get(c.t, &st), 0);
    int64_t nodes = st.inodes + st.cnodes + st.snodes + st.tnodes + st.lnodes + st.setnodes;
    if (live > nodes + 2 + 64) {
        g_fail++;
        fprintf(stderr,
                "%s:%d: an idle thread keeps freed memory alive: %" PRId64
                " live allocations for a trie of %" PRId64 " nodes (cst_reclaim() = %" PRId64
                " pending) until that thread runs again or exits\n",
                __FILE__, __LINE__, live, nodes, pending);
    } else {
        g_pass++;
    }
    idle_go(&c, 4);
    pthread_join(th, NULL);
    CHECK(live_after_reclaim() - start <= nodes + 2 + 64); /* released at thread exit */
    cst_free(c.t);
    CHECK_NO_LEAK(start);
}

/* ------------------------------------------------------------------------
 * Prompt reclamation, fork
 * ---------------------------------------------------------------------- */

/* A thread that holds an epoch section open until told to leave it (as a
 * thread inside a long engine call would). */
typedef struct holder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage;                 /* 1 inside, 2 leave, 3 left */
} holder;

static void holder_set(holder *h, int stage)
{
    pthread_mutex_lock(&h->mu);
    h->stage = stage;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void holder_wait(holder *h, int stage)
{
    pthread_mutex_lock(&h->mu);
    while (h->stage < stage)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void *holder_thread(void *arg)
{
    holder *h = arg;
    ebr_record *rec = ebr_enter();
    holder_set(h, 1);
    holder_wait(h, 2);
    ebr_exit(rec); /* its first exit after the drop: the trie goes here */
    holder_set(h, 3);
    return NULL;
}

static cst_trie *filled_trie(int n)
{
    cst_trie *t = cst_new(&amqp);
    char buf[48];
    for (int i = 0; i < n; i++) {
        int l = snprintf(buf, sizeof buf, "s%d.d%d.m%d", i % 50, i % 977, i);
        cst_subscribe(t, buf, (size_t)l, (uint64_t)(i % 5000) + 1);
    }
    return t;
}

/* A dropped trie comes back by the time cst_free returns when no other thread
 * is inside an engine call; with one inside, at that thread's next exit. */
void test_prompt_reclaim(void)
{
    int64_t start = live_after_reclaim();
    cst_trie *t = filled_trie(20000);
    CHECK(cst_live_allocations() - start > 20000);
    cst_free(t); /* no cst_reclaim() here: the free itself must do it */
    CHECK_EQ(cst_live_allocations(), start);

    holder h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, holder_thread, &h), 0);
    holder_wait(&h, 1);
    t = filled_trie(20000);
    int64_t full = cst_live_allocations() - start;
    cst_free(t);
    /* The other thread's open section (an older epoch) keeps it alive. */
    CHECK(cst_live_allocations() - start > full / 2);
    holder_set(&h, 2);
    holder_wait(&h, 3);
    CHECK_EQ(cst_live_allocations(), start);
    pthread_join(th, NULL);
    CHECK_NO_LEAK(start);
}

/* fork() while another thread is inside an engine call: the child must not
 * hang and must keep reclaiming (its copy of that thread's record must not
 * hold the epoch back forever). */
void test_fork_reclaims(void)
{
    int64_t start = live_after_reclaim();
    holder h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, holder_thread, &h), 0);
    holder_wait(&h, 1);
    cst_trie *t = filled_trie(2000);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60); /* a hang is a failure, not a stuck CI job */
        int64_t base = cst_live_allocations();
        char buf[48];
        for (int i = 0; i < 100000; i++) {
            int l = snprintf(buf, sizeof buf, "c.%d.x", i % 512);
            cst_subscribe(t, buf, (size_t)l, 424242);
            cst_unsubscribe(t, buf, (size_t)l, 424242);
        }
        int64_t grown = cst_live_allocations() - base;
        int64_t pending = cst_reclaim();
        cst_free(t);
        int ok = grown < 5000 && pending == 0;
        if (!ok)
            fprintf(stderr, "fork child: live allocations grew by %" PRId64 ", %" PRId64
                            " pending after cst_reclaim()\n", grown, pending);
        _exit(ok ? 0 : 2);
    }
    CHECK(pid > 0);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    holder_set(&h, 2);
    holder_wait(&h, 3);
    pthread_join(th, NULL);
    cst_free(t);
    CHECK_NO_LEAK(start);
}
