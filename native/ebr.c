/*
 * ebr.c - epoch-based reclamation (EBR), lock-free.
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
 * 1. A record's state is (e << 1) | inside: inside is 1 within a section,
 *    and e is the global epoch the owner read when it entered its latest
 *    section (0 for a record never used).  Only its owner writes it, except
 *    for the fork child handler (see 7).
 * 2. The global epoch only increases, by CAS from g to g+1, and only after a
 *    scan found no record inside a section with a local epoch other than g.
 * 3. A retired object is tagged with the global epoch read after its unlink
 *    and is released only when the global epoch is >= tag + 2 (argument above).
 *    A chunk's tag is the largest tag of its entries.
 * 4. The scanner reads every record's state with a seq_cst load, claimed or
 *    not.  Every engine read that reaches a node starts from a seq_cst load
 *    (the root, an I-node's main), every unlink is a seq_cst CAS, the owner
 *    enters with a seq_cst exchange and the retire reads the epoch with a
 *    seq_cst load: all of them are in the single total order S of seq_cst
 *    operations.  If the scan's load of a record's state reads a value from
 *    before the owner's enter exchange X, the load precedes X in S (a seq_cst
 *    load reads the last seq_cst store before it in S, or a store that does
 *    not happen before that one; the owner's earlier exit store happens
 *    before X).  The scan comes after the unlink U in S (U, then the
 *    retire's epoch load, then the advance the scan is for), so U precedes X
 *    and every load of the section that follows X: the section cannot reach
 *    the unlinked node.  If the load reads the exit store after X, it reads
 *    a release store: the section's reads happen before the free.  No
 *    stand-alone fence is used (ThreadSanitizer would not model it), and no
 *    scanner writes another thread's state line: reading it costs that
 *    thread one cache miss, not a line stolen on every scan.
 * 5. Retired objects go into the owner's open chunk.  Inside a section the
 *    owner holds it privately (`mine`): appending takes no lock and no atomic
 *    read-modify-write.  When its section ends the owner publishes the chunk
 *    in `open` (a store); its first retire of a later section takes it back
 *    (one exchange), unless a reclaimer took it meanwhile (one exchange too:
 *    exactly one of the two gets it).  A full chunk is sealed: pushed onto the
 *    record's `sealed` stack (a Treiber stack: a CAS per push).  A reclaimer
 *    takes a record's open chunk and its stack whole (exchanges to NULL),
 *    releases the chunks that are ready and pushes the rest onto the stack.
 *    Pushes only add and takers take everything, so there is no ABA, and no
 *    step of any thread waits for another: a thread preempted anywhere holds
 *    up nobody's retire or reclaim.
 * 6. Who collects what.  A thread collects its own record (its own lines)
 *    whenever it reclaims.  It takes another record's garbage only when that
 *    record's owner is gone (in_use 0) or idle: outside any section and not
 *    entered since two epochs before the current one; a busy thread releases
 *    its own.  Outside its sections a thread's garbage is always within the
 *    others' reach, so a thread that goes idle or ends holds back no memory:
 *    once it is idle the others release it.  Forced collections (ebr_barrier,
 *    prompt reclamation) take every record's published garbage.
 * 7. Records are never freed (a scanner may be reading one); they are reused.
 * 8. After fork() the child has one thread.  Every other record's owner is
 *    gone: the child handler marks those records outside any section and free
 *    (so they cannot block invariant 2); their published chunks stay within
 *    reach.  A thread that was inside a section, or between two steps of a
 *    push or a take, at the fork can only make the child leak the chunks it
 *    held, never use them twice: no lock exists that the child could wait on
 *    forever.  The handler then counts each record's reachable chunks again,
 *    so that the leaked ones do not stay counted as pending.
 *
 * Cost.  Nothing global is written per section: entering reads the global
 * epoch and writes the thread's own state line.  Reclaiming is amortised:
 * every RETIRE_SCAN_EVERY retirements a thread tries to advance the epoch
 * (one load of each record's state line) and collects its own garbage; if
 * another thread moved the epoch since its last try, it only collects.  A
 * thread that retires nothing for COLLECT_SECTIONS sections but holds
 * garbage collects its own at the epoch it read.
 *
 * Prompt reclamation.  Reclaiming is normally amortised (every
 * RETIRE_SCAN_EVERY retirements of a thread).  A caller that drops something
 * big (a whole trie or snapshot) asks for it promptly (ebr_retire_prompt): the
 * epoch it needs is published in `urgent`, and every section exit (the
 * caller's own first) tries to advance the epoch and collect until that epoch
 * is reached.  So the memory comes back when the call returns if no other
 * thread is inside a section, and otherwise no later than those threads' next
 * section exits.
 *
 * Limbo bookkeeping uses the system allocator directly, not the injectable
 * one: a failed bookkeeping allocation would leave no safe way to continue, so
 * it aborts the process (as CPython does on a failed internal allocation).
 */
#include "ebr.h"

#include <pthread.h>
#include "tls.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define LIMBO_CHUNK 64
#define RETIRE_SCAN_EVERY 256  /* retirements between two tries to advance */
#define COLLECT_SECTIONS 4096  /* sections without a retire before collecting own */
#define CHUNK_POOL 16 /* empty chunks a thread keeps for reuse (1 KiB each) */

typedef struct limbo_entry {
    void *obj;
    ebr_release_fn release;
} limbo_entry;

typedef struct limbo_chunk {
    struct limbo_chunk *next;  /* link in a sealed stack or a pool */
    uint64_t tag;              /* the largest tag of its entries (inv. 3) */
    unsigned n;                /* entries written (by its holder only) */
    limbo_entry e[LIMBO_CHUNK];
} limbo_chunk;

struct ebr_record {
    _Atomic uint64_t state;          /* invariant 1 */
    _Atomic int in_use;              /* claimed by a thread (registration only) */
    struct ebr_record *next;         /* global list, append-only (invariant 7) */
    unsigned index;
    unsigned since_scan;             /* owner only */
    unsigned sections;               /* owner only: sections since its last collect */
    unsigned depth;                  /* owner only: sections open, nested (ebr_enter) */
    int reclaiming;                  /* owner only: inside a reclamation (release fns) */
    int want_prompt;                 /* owner only: this section asked for it */
    uint64_t entered;                /* owner only: the epoch of its current section */
    uint64_t tried;                  /* owner only: the epoch of its last try to advance */
    limbo_chunk *mine;               /* owner only: the open chunk, inside a section */
    limbo_chunk *ready;              /* owner only: chunks ready, released one per exit */
    limbo_chunk *pool;               /* owner only: empty chunks for reuse */
    unsigned npool;
    char pad1[128];
    _Atomic(limbo_chunk *) open;     /* the open chunk between sections (inv. 5) */
    _Atomic(limbo_chunk *) sealed;   /* Treiber stack (inv. 5) */
    _Atomic int64_t count;           /* entries in sealed and ready chunks */
    _Atomic int64_t open_n;          /* entries in the published open chunk */
    char pad2[128];
};

static _Atomic uint64_t global_epoch = 1;
static _Atomic uint64_t urgent;      /* 0, or an epoch whose garbage is wanted back */
static _Atomic(ebr_record *) records;
static _Atomic unsigned record_count;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static CST_TLS ebr_record *tls_record;

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fputs("cstrie: out of memory in reclamation bookkeeping\n", stderr);
        abort();
    }
    return p;
}

/* ------------------------------------------------------------------------
 * Chunks and sealed stacks
 * ---------------------------------------------------------------------- */

static limbo_chunk *chunk_get(ebr_record *rec)
{
    limbo_chunk *c = rec->pool;
    if (c != NULL) {
        rec->pool = c->next;
        rec->npool--;
    } else {
        c = xmalloc(sizeof *c);
    }
    c->next = NULL;
    c->tag = 0;
    c->n = 0;
    return c;
}

/* An emptied chunk: into rec's pool (rec may be NULL: no owner), or freed. */
static void chunk_put(ebr_record *rec, limbo_chunk *c)
{
    if (rec != NULL && rec->npool < CHUNK_POOL) {
        c->next = rec->pool;
        rec->pool = c;
        rec->npool++;
    } else {
        free(c);
    }
}

/* Push the chain first..last onto a sealed stack. */
static void stack_push(_Atomic(limbo_chunk *) *stack, limbo_chunk *first, limbo_chunk *last)
{
    limbo_chunk *head = atomic_load_explicit(stack, memory_order_relaxed);
    do {
        last->next = head;
        /* release: the chunks' entries (and links) are visible to the thread
         * that takes the stack (its acquire exchange). */
    } while (!atomic_compare_exchange_weak_explicit(stack, &head, first, memory_order_release,
                                                    memory_order_relaxed));
}

/* Push a chunk onto r's sealed stack (it is the caller's to give). */
static void seal(ebr_record *r, limbo_chunk *c)
{
    atomic_fetch_add_explicit(&r->count, c->n, memory_order_relaxed);
    stack_push(&r->sealed, c, c);
}

/* The owner ends a section: its open chunk goes where others can reach it. */
static void publish_open(ebr_record *rec)
{
    limbo_chunk *c = rec->mine;
    if (c == NULL)
        return;
    rec->mine = NULL;
    atomic_store_explicit(&rec->open_n, c->n, memory_order_relaxed);
    /* release: the entries are visible to whoever takes the chunk (acquire). */
    limbo_chunk *old = atomic_exchange_explicit(&rec->open, c, memory_order_acq_rel);
    if (old != NULL)
        seal(rec, old); /* cannot happen (only the owner publishes); be safe */
}

/* Run the release functions of a chain of ready chunks; returns the chunks
 * to `me`'s pool (or frees them). */
static void release_chain(ebr_record *me, limbo_chunk *c)
{
    while (c != NULL) {
        limbo_chunk *next = c->next;
        for (unsigned i = 0; i < c->n; i++)
            c->e[i].release(c->e[i].obj);
        chunk_put(me, c);
        c = next;
    }
}

/* Run the releases of one chunk of me's ready list (its owner). */
static void release_ready_one(ebr_record *me)
{
    limbo_chunk *c = me->ready;
    me->ready = c->next;
    c->next = NULL;
    int64_t n = c->n;
    release_chain(me, c);
    atomic_fetch_sub_explicit(&me->count, n, memory_order_relaxed);
}

static void release_ready_all(ebr_record *me)
{
    while (me->ready != NULL)
        release_ready_one(me);
}

/* Take r's open chunk and sealed stack, release what is ready at `epoch`,
 * push the rest onto the stack.  A thread's own ready chunks go to its ready
 * list unless `now`: it releases them one per section exit, so that a batch
 * of thousands of nodes that an epoch step makes ready at once comes back to
 * the allocator a chunk at a time, where its per-thread cache takes it
 * (alloc.c), instead of overflowing into malloc's slow paths. */
static void collect_record(ebr_record *me, ebr_record *r, uint64_t epoch, int now)
{
    limbo_chunk *c = NULL;
    if (atomic_load_explicit(&r->open, memory_order_relaxed) != NULL) {
        /* acquire: pairs with the release of publish_open (the entries). */
        limbo_chunk *o = atomic_exchange_explicit(&r->open, NULL, memory_order_acquire);
        if (o != NULL) {
            atomic_store_explicit(&r->open_n, 0, memory_order_relaxed);
            atomic_fetch_add_explicit(&r->count, o->n, memory_order_relaxed);
            o->next = NULL;
            c = o;
        }
    }
    if (atomic_load_explicit(&r->sealed, memory_order_relaxed) != NULL) {
        /* acquire: pairs with the release of the pushes (the entries). */
        limbo_chunk *s = atomic_exchange_explicit(&r->sealed, NULL, memory_order_acquire);
        if (c != NULL)
            c->next = s;
        else
            c = s;
    }
    if (c == NULL)
        return;
    limbo_chunk *ready = NULL, *ready_last = NULL, *keep = NULL, *keep_last = NULL;
    int64_t released = 0;
    while (c != NULL) {
        limbo_chunk *next = c->next;
        if (c->tag + 2 <= epoch) {
            c->next = ready;
            if (ready == NULL)
                ready_last = c;
            ready = c;
            released += c->n;
        } else {
            c->next = keep;
            if (keep == NULL)
                keep_last = c;
            keep = c;
        }
        c = next;
    }
    if (keep != NULL)
        stack_push(&r->sealed, keep, keep_last);
    if (ready == NULL)
        return;
    if (r == me && !now) {
        ready_last->next = me->ready; /* still counted in me->count */
        me->ready = ready;
        return;
    }
    atomic_fetch_sub_explicit(&r->count, released, memory_order_relaxed);
    release_chain(me, ready);
}

/* ------------------------------------------------------------------------
 * Records
 * ---------------------------------------------------------------------- */

static void record_leave(ebr_record *rec)
{
    rec->reclaiming = 1; /* release functions may open sections: no reclaim in them */
    release_ready_all(rec);
    rec->reclaiming = 0;
    publish_open(rec);
    while (rec->pool != NULL) {
        limbo_chunk *c = rec->pool;
        rec->pool = c->next;
        free(c);
    }
    rec->npool = 0;
    /* release: orders the seal above before a new owner's claim. */
    atomic_store_explicit(&rec->state, rec->entered << 1, memory_order_release);
    atomic_store_explicit(&rec->in_use, 0, memory_order_release);
}

static void thread_exit_destructor(void *arg)
{
    ebr_record *rec = arg;
    if (rec == NULL)
        return;
    /* The sealed chunks stay with the record; other threads release them. */
    record_leave(rec);
    tls_record = NULL;
}

/* Invariant 8: in the child of fork(), only the forking thread exists. */
static void atfork_child(void)
{
    ebr_record *me = tls_record;
    for (ebr_record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next) {
        if (r == me)
            continue;
        r->mine = NULL; /* chunks of a thread that no longer exists: leaked, never reused */
        r->ready = NULL;
        r->pool = NULL;
        r->npool = 0;
        atomic_store_explicit(&r->state, 0, memory_order_relaxed);
        atomic_store_explicit(&r->in_use, 0, memory_order_relaxed);
    }
    /* A thread that was between two steps of a seal, a push or a collect_record
     * at the fork had counted chunks the child can no longer reach (they are
     * leaked): count again what is reachable, so that ebr_pending() tells the
     * truth and cst_reclaim() can reach 0.  The child has one thread, so the
     * stacks hold still while they are walked. */
    for (ebr_record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next) {
        int64_t n = 0;
        for (limbo_chunk *c = atomic_load_explicit(&r->sealed, memory_order_relaxed); c; c = c->next)
            n += c->n;
        for (limbo_chunk *c = r->ready; c; c = c->next) /* this thread's own */
            n += c->n;
        atomic_store_explicit(&r->count, n, memory_order_relaxed);
        limbo_chunk *o = atomic_load_explicit(&r->open, memory_order_relaxed);
        atomic_store_explicit(&r->open_n, o != NULL ? (int64_t)o->n : 0, memory_order_relaxed);
    }
}

static void make_key(void)
{
    if (pthread_key_create(&tls_key, thread_exit_destructor) != 0)
        abort();
    if (pthread_atfork(NULL, NULL, atfork_child) != 0)
        abort();
}

static ebr_record *register_thread(void)
{
    pthread_once(&tls_once, make_key);
    ebr_record *rec;
    for (rec = atomic_load_explicit(&records, memory_order_acquire); rec; rec = rec->next) {
        int expected = 0;
        /* acquire: pairs with the release in record_leave. */
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
        atomic_init(&rec->open, NULL);
        atomic_init(&rec->sealed, NULL);
        atomic_init(&rec->count, 0);
        atomic_init(&rec->open_n, 0);
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
    rec->sections = 0;
    rec->depth = 0;
    rec->reclaiming = 0;
    rec->want_prompt = 0;
    rec->tried = 0;
    rec->entered = atomic_load_explicit(&rec->state, memory_order_relaxed) >> 1;
    tls_record = rec;
    pthread_setspecific(tls_key, rec);
    return rec;
}

/* ------------------------------------------------------------------------
 * Sections, epochs, reclamation
 * ---------------------------------------------------------------------- */

ebr_record *ebr_enter(void)
{
    ebr_record *rec = tls_record;
    if (rec == NULL && (rec = register_thread()) == NULL)
        return NULL;
    if (rec->depth++ > 0)
        return rec; /* nested: the outer section protects (and is longer) */
    uint64_t e = atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    rec->entered = e;
    /* seq_cst exchange: forbids later node loads from moving above the
     * publication of this section (invariant 4, StoreLoad). */
    atomic_exchange_explicit(&rec->state, (e << 1) | 1, memory_order_seq_cst);
    return rec;
}

/* Try to move the global epoch forward by one step (invariant 2); the epoch
 * after the try. */
static uint64_t try_advance(void)
{
    uint64_t g = atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    for (ebr_record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next) {
        /* seq_cst load of every record's state, claimed or not: ordered in S
         * after the unlinks whose objects this advance may free, and before
         * any enter it did not see (invariant 4). */
        uint64_t s = atomic_load_explicit(&r->state, memory_order_seq_cst);
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

/* Is r's owner gone, or idle (outside any section, not entered since two
 * epochs before `epoch`)?  Then its garbage is others' to release (inv. 6). */
static int record_idle(ebr_record *r, uint64_t epoch)
{
    if (atomic_load_explicit(&r->in_use, memory_order_relaxed) == 0)
        return 1;
    /* relaxed: a stale value only makes a record look busy (its owner then
     * releases its garbage itself) or idle a little late. */
    uint64_t s = atomic_load_explicit(&r->state, memory_order_relaxed);
    return !(s & 1) && (s >> 1) + 2 <= epoch;
}

/* Release what is ready at `epoch`: this thread's own garbage, and that of
 * records whose owners are gone or idle; every record's when `force`
 * (invariants 5 and 6). */
static void collect_all(ebr_record *me, uint64_t epoch, int force)
{
    for (ebr_record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next) {
        if (r == me || force || record_idle(r, epoch))
            collect_record(me, r, epoch, force);
    }
    if (force && me != NULL)
        release_ready_all(me);
}

/* Amortised reclamation: try to advance unless another thread moved the
 * epoch since this thread's last try, then collect. */
static void reclaim(ebr_record *me)
{
    uint64_t g = atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    if (g == me->tried)
        g = try_advance();
    me->tried = g;
    me->sections = 0;
    collect_all(me, g, 0);
}

/* Advance (up to twice) and collect everything ready until the epoch asked
 * for in `urgent` is reached; then clear the request.  A thread that only
 * helps (it did not ask) does so while the epoch is short of the request,
 * and once more when it reaches it. */
static void reclaim_prompt(ebr_record *me, int asked)
{
    uint64_t u = atomic_load_explicit(&urgent, memory_order_acquire);
    uint64_t e = atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    if (!asked && (u == 0 || (e >= u && me->tried >= u)))
        return; /* reached, and this thread collected at it already */
    if (u == 0 || e < u)
        e = try_advance();
    if (u != 0 && e < u)
        e = try_advance();
    me->tried = e;
    me->sections = 0;
    collect_all(me, e, 1);
    /* acq_rel on success: a later request (a larger u) is never lost, since
     * the CAS only clears the value it read. */
    if (u != 0 && e >= u)
        atomic_compare_exchange_strong_explicit(&urgent, &u, 0, memory_order_acq_rel,
                                                memory_order_relaxed);
}

void ebr_exit(ebr_record *rec)
{
    if (--rec->depth > 0)
        return; /* the outermost exit publishes and reclaims */
    publish_open(rec);
    /* release: every node read in this section is read before a scanner can
     * observe the section closed and free the node.  The epoch of the section
     * stays in the state (invariant 1: idleness is read from it). */
    atomic_store_explicit(&rec->state, rec->entered << 1, memory_order_release);
    if (rec->reclaiming)
        return; /* a section a release function opened: the outer reclaim goes on */
    rec->reclaiming = 1;
    if (rec->want_prompt || atomic_load_explicit(&urgent, memory_order_relaxed) != 0) {
        int asked = rec->want_prompt;
        rec->want_prompt = 0;
        if (asked)
            rec->since_scan = 0;
        reclaim_prompt(rec, asked);
    } else if (rec->since_scan >= RETIRE_SCAN_EVERY) {
        rec->since_scan = 0;
        reclaim(rec);
    } else if (++rec->sections >= COLLECT_SECTIONS) {
        /* no retire for a while: release what of ours is ready, no scan */
        rec->sections = 0;
        if (atomic_load_explicit(&rec->open, memory_order_relaxed) != NULL ||
            atomic_load_explicit(&rec->sealed, memory_order_relaxed) != NULL)
            collect_record(rec, rec, atomic_load_explicit(&global_epoch, memory_order_seq_cst), 0);
    }
    if (rec->ready != NULL)
        release_ready_one(rec);
    rec->reclaiming = 0;
}

void ebr_retire(ebr_record *rec, void *obj, ebr_release_fn release)
{
    /* seq_cst: the tag is read after the unlink CAS (invariant 3). */
    uint64_t tag = atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    limbo_chunk *c = rec->mine;
    if (c == NULL) {
        /* acquire: the entries the chunk got in our earlier sections are
         * ours again, unless a reclaimer took it meanwhile (then NULL). */
        if (atomic_load_explicit(&rec->open, memory_order_relaxed) != NULL &&
            (c = atomic_exchange_explicit(&rec->open, NULL, memory_order_acquire)) != NULL)
            atomic_store_explicit(&rec->open_n, 0, memory_order_relaxed);
        else
            c = chunk_get(rec);
        rec->mine = c;
    }
    c->e[c->n].obj = obj;
    c->e[c->n].release = release;
    if (tag > c->tag)
        c->tag = tag;
    if (++c->n == LIMBO_CHUNK) {
        rec->mine = NULL;
        seal(rec, c);
    }
    rec->since_scan++;
}

void ebr_retire_any(void *obj, ebr_release_fn release)
{
    ebr_record *rec = tls_record;
    if (rec == NULL && (rec = register_thread()) == NULL) {
        fputs("cstrie: out of memory in reclamation bookkeeping\n", stderr);
        abort();
    }
    ebr_retire(rec, obj, release);
    if (rec->depth == 0)
        publish_open(rec); /* outside a section: within others' reach now */
}

void ebr_retire_prompt(ebr_record *rec, void *obj, ebr_release_fn release)
{
    ebr_retire(rec, obj, release);
    /* The object is released at epoch tag + 2; ask for at least that. */
    uint64_t want = atomic_load_explicit(&global_epoch, memory_order_seq_cst) + 2;
    uint64_t u = atomic_load_explicit(&urgent, memory_order_relaxed);
    /* release: a thread that sees the request also sees the retire (it is
     * sealed before our section ends anyway). */
    while (u < want && !atomic_compare_exchange_weak_explicit(&urgent, &u, want,
                                                              memory_order_release,
                                                              memory_order_relaxed))
        ;
    rec->want_prompt = 1;
}

unsigned ebr_record_index(const ebr_record *rec) { return rec->index; }

uint64_t ebr_try_advance(void)
{
    ebr_record *me = tls_record;
    if (me != NULL && me->depth > 0)
        return atomic_load_explicit(&global_epoch, memory_order_seq_cst);
    return try_advance();
}

int64_t ebr_barrier(void)
{
    ebr_record *me = tls_record;
    if (me == NULL && (me = register_thread()) == NULL)
        return ebr_pending();
    int was = me->reclaiming;
    me->reclaiming = 1; /* release functions may open sections: no reclaim in them */
    int64_t left = 0;
    for (int round = 0; round < 8; round++) {
        collect_all(me, try_advance(), 1);
        if ((left = ebr_pending()) == 0)
            break;
    }
    me->reclaiming = was;
    return left;
}

int64_t ebr_pending(void)
{
    int64_t n = 0;
    for (ebr_record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next) {
        n += atomic_load_explicit(&r->count, memory_order_relaxed);
        n += atomic_load_explicit(&r->open_n, memory_order_relaxed);
        if (r == tls_record && r->mine != NULL) /* inside one of our sections */
            n += r->mine->n;
    }
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
