/*
 * ebr.c - epoch-based reclamation (EBR).
 *
 * Correctness argument
 * --------------------
 * A node may be freed only when no thread can still dereference it.  Threads
 * reach nodes only from the trie roots, by loads made inside an epoch section.
 * A writer first unlinks a node (a CAS that makes it unreachable from every
 * root that new sections can read), then retires it, tagging it with the
 * global epoch G read AFTER the unlink.  A reader that still holds the node
 * loaded it before the unlink, so it entered its section, publishing its local
 * epoch e, at a time when the global epoch was at most G: e <= tag.
 * The global epoch moves from g to g+1 only when every thread that is inside a
 * section has published local epoch g.  So when the global epoch reaches
 * tag+2, the step tag+1 -> tag+2 saw every open section at tag+1 > e: the
 * reader's section was closed.  Therefore objects tagged t are released once
 * the global epoch is >= t+2.
 *
 * Invariants
 * ----------
 * 1. A record's state is 0 (outside a section) or (e << 1) | 1 (inside a
 *    section entered while the global epoch was e).  Only its owner writes it,
 *    except for the scanner's no-op read-modify-write (see 4).
 * 2. The global epoch only increases, by CAS from g to g+1, and only after a
 *    scan found no record inside a section with a local epoch other than g.
 * 3. A retired object is tagged with the global epoch read after its unlink
 *    and is released only when the global epoch is >= tag + 2 (argument above).
 * 4. The scanner reads each record's state with a seq_cst read-modify-write
 *    (fetch_or 0).  An RMW reads the last value in the state's modification
 *    order, so if it reads "outside", the owner's next enter (a seq_cst
 *    exchange on the same word) is ordered after it and synchronises with it:
 *    that section then sees every unlink that preceded the scan.  This gives
 *    the StoreLoad ordering without a stand-alone fence (which
 *    ThreadSanitizer would not model).
 * 5. A record's limbo list is guarded by its own spin lock: the owner takes
 *    it to append (uncontended in the common case), and any thread that
 *    reclaims takes it with a try-lock to detach the chunks that are ready,
 *    releasing them after dropping the lock.  So garbage retired by a thread
 *    that has gone idle, or has ended (its record is free, in_use 0, and keeps
 *    its limbo until reused), is freed by the others: no thread stalls
 *    reclamation, and an idle one is outside any section (state 0) and never
 *    blocks invariant 2.
 * 6. Records are never freed (a scanner may be reading one); they are reused.
 *
 * Limbo bookkeeping uses the system allocator directly, not the injectable
 * one: a failed bookkeeping allocation would leave no safe way to continue, so
 * it aborts the process (as CPython does on a failed internal allocation).
 */
#include "ebr.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define LIMBO_CHUNK 256
#define RETIRE_SCAN_EVERY 64

typedef struct limbo_entry {
    void *obj;
    ebr_release_fn release;
} limbo_entry;

typedef struct limbo_chunk {
    struct limbo_chunk *next;
    uint64_t tag;          /* the largest tag of its entries */
    unsigned n;
    limbo_entry e[LIMBO_CHUNK];
} limbo_chunk;

typedef struct limbo_list {
    limbo_chunk *head;     /* newest chunk first */
    _Atomic int64_t count; /* written under the lock, read anywhere */
} limbo_list;

struct ebr_record {
    _Atomic uint64_t state;        /* invariant 1 */
    _Atomic int in_use;
    struct ebr_record *next;       /* global list, append-only (invariant 6) */
    unsigned index;
    unsigned since_scan;
    atomic_flag limbo_lock;        /* invariant 5 */
    limbo_list limbo;
    char pad[64];
};

static _Atomic uint64_t global_epoch = 1;
static _Atomic(ebr_record *) records;
static _Atomic unsigned record_count;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static _Thread_local ebr_record *tls_record;

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fputs("cstrie: out of memory in reclamation bookkeeping\n", stderr);
        abort();
    }
    return p;
}

static void limbo_lock(ebr_record *r)
{
    /* acquire: the list as the last holder left it is visible. */
    while (atomic_flag_test_and_set_explicit(&r->limbo_lock, memory_order_acquire))
        ;
}

static int limbo_trylock(ebr_record *r)
{
    /* acquire: as limbo_lock. */
    return !atomic_flag_test_and_set_explicit(&r->limbo_lock, memory_order_acquire);
}

static void limbo_unlock(ebr_record *r)
{
    /* release: our changes to the list are visible to the next holder. */
    atomic_flag_clear_explicit(&r->limbo_lock, memory_order_release);
}

/* Detach (under the lock) the chunks whose tag + 2 <= epoch. */
static limbo_chunk *limbo_take_ready(limbo_list *l, uint64_t epoch)
{
    limbo_chunk *ready = NULL;
    limbo_chunk **link = &l->head;
    int64_t n = 0;
    while (*link != NULL) {
        limbo_chunk *c = *link;
        if (c->tag + 2 <= epoch) {
            *link = c->next;
            c->next = ready;
            ready = c;
            n += c->n;
        } else {
            link = &c->next;
        }
    }
    if (n)
        atomic_fetch_sub_explicit(&l->count, n, memory_order_relaxed);
    return ready;
}

/* Run the release functions of detached chunks (no lock held). */
static void release_chain(limbo_chunk *c)
{
    while (c != NULL) {
        limbo_chunk *next = c->next;
        for (unsigned i = 0; i < c->n; i++)
            c->e[i].release(c->e[i].obj);
        free(c);
        c = next;
    }
}

static void thread_exit_destructor(void *arg)
{
    ebr_record *rec = arg;
    if (rec == NULL)
        return;
    /* The limbo stays with the record; other threads reclaim it (inv. 5). */
    atomic_store_explicit(&rec->state, 0, memory_order_release);
    /* release: this thread's last limbo changes precede a new owner's claim. */
    atomic_store_explicit(&rec->in_use, 0, memory_order_release);
    tls_record = NULL;
}

static void make_key(void)
{
    if (pthread_key_create(&tls_key, thread_exit_destructor) != 0)
        abort();
}

static ebr_record *register_thread(void)
{
    pthread_once(&tls_once, make_key);
    ebr_record *rec;
    for (rec = atomic_load_explicit(&records, memory_order_acquire); rec; rec = rec->next) {
        int expected = 0;
        /* acquire: pairs with the release in thread_exit_destructor. */
        if (atomic_load_explicit(&rec->in_use, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&rec->in_use, &expected, 1,
                                                    memory_order_acquire,
                                                    memory_order_relaxed))
            break;
    }
    if (rec == NULL) {
        rec = calloc(1, sizeof *rec);
        if (rec == NULL)
            return NULL;
        atomic_init(&rec->state, 0);
        atomic_init(&rec->in_use, 1);
        atomic_flag_clear(&rec->limbo_lock);
        atomic_init(&rec->limbo.count, 0);
        rec->index = atomic_fetch_add_explicit(&record_count, 1, memory_order_relaxed);
        ebr_record *head = atomic_load_explicit(&records, memory_order_relaxed);
        do {
            rec->next = head;
            /* release: a scanner that loads the new head sees an initialised record. */
        } while (!atomic_compare_exchange_weak_explicit(&records, &head, rec,
                                                        memory_order_release,
                                                        memory_order_relaxed));
    }
    rec->since_scan = 0;
    tls_record = rec;
    pthread_setspecific(tls_key, rec);
    return rec;
}

ebr_record *ebr_enter(void)
{
    ebr_record *rec = tls_record;
    if (rec == NULL && (rec = register_thread()) == NULL)
        return NULL;
    uint64_t e = atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    /* seq_cst exchange: forbids later node loads from moving above the
     * publication of this section (invariant 4, StoreLoad). */
    atomic_exchange_explicit(&rec->state, (e << 1) | 1, memory_order_seq_cst);
    return rec;
}

/* Try to move the global epoch forward by one step (invariant 2). */
static uint64_t try_advance(void)
{
    uint64_t g = atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    for (ebr_record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next) {
        if (atomic_load_explicit(&r->in_use, memory_order_acquire) == 0)
            continue;
        /* seq_cst RMW: reads the latest state and orders the owner's next
         * enter after this scan (invariant 4). */
        uint64_t s = atomic_fetch_or_explicit(&r->state, 0, memory_order_seq_cst);
        if ((s & 1) && (s >> 1) != g)
            return g;
    }
    /* seq_cst: the new epoch is ordered after every state read above. */
    if (atomic_compare_exchange_strong_explicit(&global_epoch, &g, g + 1,
                                                memory_order_seq_cst,
                                                memory_order_seq_cst))
        return g + 1;
    return g;
}

/* Free what every record (live, idle or ended) has ready (invariant 5). */
static void collect_all(uint64_t epoch, int wait)
{
    for (ebr_record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next) {
        if (atomic_load_explicit(&r->limbo.count, memory_order_relaxed) == 0)
            continue;
        if (wait)
            limbo_lock(r);
        else if (!limbo_trylock(r))
            continue;
        limbo_chunk *ready = limbo_take_ready(&r->limbo, epoch);
        limbo_unlock(r);
        release_chain(ready);
    }
}

static void reclaim(void)
{
    collect_all(try_advance(), 0);
}

void ebr_exit(ebr_record *rec)
{
    /* release: every node read in this section is read before a scanner can
     * observe the section closed and free the node. */
    atomic_store_explicit(&rec->state, 0, memory_order_release);
    if (rec->since_scan >= RETIRE_SCAN_EVERY) {
        rec->since_scan = 0;
        reclaim();
    }
}

void ebr_retire(ebr_record *rec, void *obj, ebr_release_fn release)
{
    /* seq_cst: the tag is read after the unlink CAS (invariant 3). */
    uint64_t tag = atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    limbo_lock(rec);
    limbo_chunk *c = rec->limbo.head;
    if (c == NULL || c->n == LIMBO_CHUNK) {
        c = xmalloc(sizeof *c);
        c->n = 0;
        c->tag = tag;
        c->next = rec->limbo.head;
        rec->limbo.head = c;
    }
    if (tag > c->tag)
        c->tag = tag;
    c->e[c->n].obj = obj;
    c->e[c->n].release = release;
    c->n++;
    atomic_fetch_add_explicit(&rec->limbo.count, 1, memory_order_relaxed);
    limbo_unlock(rec);
    rec->since_scan++;
}

unsigned ebr_record_index(const ebr_record *rec) { return rec->index; }

int64_t ebr_barrier(void)
{
    for (int round = 0; round < 8; round++) {
        collect_all(try_advance(), 1);
        if (ebr_pending() == 0)
            return 0;
    }
    return ebr_pending();
}

int64_t ebr_pending(void)
{
    int64_t n = 0;
    for (ebr_record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next)
        n += atomic_load_explicit(&r->limbo.count, memory_order_relaxed);
    return n;
}

uint64_t ebr_epoch(void) { return atomic_load_explicit(&global_epoch, memory_order_seq_cst); }

void ebr_thread_detach(void)
{
    ebr_record *rec = tls_record;
    if (rec == NULL)
        return;
    pthread_setspecific(tls_key, NULL);
    thread_exit_destructor(rec);
}
