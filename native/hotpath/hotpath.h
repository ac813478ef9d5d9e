/*
 * hotpath.h - the CPython fast path (module cstrie._hotpath): shared types.
 *
 * Layers, each one file:
 *   module.c    - the module: binds the engine table (hotpath_api.h), the
 *                 Python callables the slow paths and errors go through, fork
 *                 handling;
 *   registry.c  - Registry and Counts: subscriber objects <-> engine ids and
 *                 the per-handle pair counts (the rules are in
 *                 cstrie/registry.py's docstring);
 *   reader.c    - Reader and Writer, the C bases of cstrie.Snapshot and
 *                 cstrie.Trie: lookup, has_subscribers, match, lookup_many,
 *                 subscribe, unsubscribe.
 * The engine itself never touches Python objects; only this extension does,
 * with the GIL held on ordinary builds (no call here releases it: each takes
 * about a microsecond) and through the thread-safe 3.13 APIs on free-threaded
 * ones.  Any input the fast path does not handle (a str subclass, text that
 * does not encode, an engine error) goes to the Python layer, which stays the
 * single source of error messages (cstrie._binding.raise_status).
 */
#ifndef CSTRIE_HOTPATH_H
#define CSTRIE_HOTPATH_H

#include "compat.h"

#include <stdatomic.h>
#include <stdint.h>

#include "hotpath_api.h"
#include "tls.h"

/* Registry rule 4: how often a read of a live trie is repeated while ids are
 * freed under it before it pins (no id it may map can be freed any more). */
#define MAX_ATTEMPTS 64
/* Subscriber stripes: the lock of a subscriber is stripes[STRIPE(hash)]:
 * enough that threads working on their own subscribers rarely meet on one. */
#define STRIPE_BITS 8
#define STRIPES (1 << STRIPE_BITS)

extern const cst_hot_api *cst_engine;  /* module.c: set once at import */

/* A long engine walk gives the GIL up (the thread state, on 3.13t) while it
 * runs, so that other threads go on (module.c, cst_set_walk_yield): a hot
 * read arms the hook around its engine call and disarms it after, which
 * takes the GIL back if the walk gave it up.  Nothing between the two may
 * touch a Python object, except after walk_disarm (route's pick callback
 * disarms first). */
typedef struct walk_state {
    int armed;
    PyThreadState *saved;
} walk_state;
extern CST_TLS walk_state hp_walk;

/* This thread's number: 0, 1, 2, ... in the order threads first ask
 * (module.c).  Per-thread structures (pin sets, a handle's anchors) are
 * picked by it modulo their count, so that threads alive together take
 * different ones until there are more threads than structures. */
extern CST_TLS unsigned hp_thread_number_1; /* the number + 1; 0: not given yet */
unsigned hp_thread_number_new(void);
static inline unsigned hp_thread_number(void)
{
    unsigned n = hp_thread_number_1;
    return n != 0 ? n - 1 : hp_thread_number_new();
}
static inline void walk_arm(void) { hp_walk.armed = 1; }
static inline void walk_disarm(void)
{
    hp_walk.armed = 0;
    if (hp_walk.saved != NULL) {
        PyThreadState *ts = hp_walk.saved;
        hp_walk.saved = NULL;
        PyEval_RestoreThread(ts);
    }
}
extern PyObject *cst_FREE;             /* the content of a free id slot */

/* -------------------------------------------------------------- id maps */
/* An open-addressing map from id (never 0) to a count. */
typedef struct idcount {
    uint64_t id;               /* 0 = empty slot */
    int64_t count;
} idcount;

typedef struct idmap {
    idcount *slots;
    size_t cap;                /* 0 or a power of two */
    size_t used;
    char pad[104];             /* 128 bytes: the parts of a Counts, changed under
                                * different stripe locks, share no line (pair) */
} idmap;
_Static_assert(sizeof(idmap) == 128, "a Counts part per line pair");

int64_t idmap_get(const idmap *m, uint64_t id);          /* 0 when absent */
int idmap_add(idmap *m, uint64_t id, int64_t delta);     /* -1: no memory */
int idmap_reserve(idmap *m);                             /* room for one more id */
int idmap_reserve_for(idmap *m, size_t more);            /* room for `more` more ids */
void idmap_clear(idmap *m);

/* KEY_BYTES: a subscriber that is an exact str of at most this many ASCII
 * characters (a client id) keeps them in its slot too, so that an equal str
 * passed again is recognised without reading the registered object. */
#define KEY_BYTES 15

/* The ids of one stripe's subscribers: open addressing over (hash, the
 * registered object, id), the object compared by identity first and with ==
 * only when the hashes agree (registry.c, "ids"). */
typedef struct idslot {
    Py_hash_t hash;
    PyObject *obj;             /* NULL = empty slot; objects[id] holds the reference */
    uint64_t id;
    int64_t birth;             /* the registry's seq when obj got id (rule 3) */
    uint8_t klen;              /* 1 + the length of obj's ASCII key, or 0: none */
    char key[KEY_BYTES];       /* obj's characters, when klen */
} idslot;

typedef struct idtab {
    idslot *slots;
    size_t cap;                /* 0 or a power of two */
    size_t used;
    uint64_t version;          /* raised by every insertion and removal (reg_id_of) */
    char pad[96];              /* 128 bytes: one pair of lines per stripe's table */
} idtab;
_Static_assert(sizeof(idtab) == 128, "a stripe's table per line pair");

/* A freed id waiting for reuse (registry rule 4). */
typedef struct freed_slot {
    uint64_t id;
    uint64_t epoch;            /* 0: never visible to a read, reusable at once */
} freed_slot;

/* A stripe lock on lines of its own (a PyMutex is one byte: 64 of them side
 * by side were one line that every update wrote; 128 bytes, since x86 CPUs
 * fetch lines in aligned pairs).  The rest of its lines hold what only the
 * lock's holder touches: the stripe's own few freed ids, oldest first, so
 * that a subscriber's id is freed and another's made without the registry's
 * one slot lock (registry.c, "Freed ids"), and its count of frees.
 *
 *   | m | nfree | freed | local[0] ... local[LOCAL_FREE - 1] |
 *   0   4       8       16                                   128
 */
#define LOCAL_FREE 7
typedef struct stripe_lock {
    cst_mutex m;
    uint32_t nfree;            /* local[0 .. nfree) in use */
    _Atomic int64_t freed;     /* ids freed under this lock (read by `freed`) */
    freed_slot local[LOCAL_FREE];
} stripe_lock;
_Static_assert(sizeof(stripe_lock) == 128, "a stripe lock per line pair");

/* The stripe of a subscriber whose hash is h. */
/* The hash's top bits after a multiply: ints and addresses, whose low bits
 * follow patterns, spread over every stripe. */
#define STRIPE(h) \
    ((Py_ssize_t)(((uint64_t)(h) * UINT64_C(0x9e3779b97f4a7c15)) >> (64 - STRIPE_BITS)))

/* ---------------------------------------------------------------- Counts */
/* The (pattern, subscriber) pairs a writable handle holds, per id.  Part s
 * holds the ids of the subscribers of stripe s and changes only under
 * stripes[s] (registry rule 2), so the map needs no lock of its own. */
typedef struct Counts {
    PyObject_HEAD
    int64_t serial;
    idmap part[STRIPES];
} Counts;

extern PyTypeObject Counts_Type;

/* A pin (rule 3): a snapshot or a read that keeps the ids it may hold.
 * `done` is the seq taken once the snapshot's engine handle exists (0 until
 * then, and for reads and iterations, which never say): the snapshot holds
 * no pair of an id born after it. */
typedef struct pin_rec {
    int64_t token;
    int64_t start, done;
    int all;                   /* a read that pinned: it holds every id until it ends */
} pin_rec;

/* The open pins, in PIN_STRIPES sets: a thread pins in its own set, so that
 * snapshots taken by many threads at once share no lock and no line. */
#define PIN_STRIPES 16
typedef struct pin_set {
    cst_mutex lock;
    _Atomic size_t count;      /* n, readable without the lock */
    size_t n, cap;
    pin_rec *pins;
    int64_t serial;
    char pad[128];
} pin_set;

/* A freed id, and the engine epoch at which it was freed: it is reused once
 * the epoch is two steps further, when no read that may still map it is
 * open (registry rule 4). */

/* -------------------------------------------------------------- Registry */
typedef struct Registry {
    PyObject_HEAD
    /* read by every call, written when the registry is made or cleared */
    PyObject *objects;         /* list: id -> subscriber, cst_FREE where unused */
    _Atomic int64_t *freed;    /* ids freed so far (a statistic), own cache line */
    void *freed_block;
    pin_set *pins;             /* PIN_STRIPES sets, 64-byte aligned */
    void *pins_block;
    int cleared;               /* the GC broke a cycle through it (registry_clear) */
    char pad0[128];
    /* written when an id is made or freed */
    cst_mutex slot_lock;       /* objects, the free ring and freed change under it */
    struct freed_slot *free_ring; /* freed ids for reuse, oldest first (rule 4) */
    size_t free_head, nfree, free_cap;
    _Atomic uint64_t free_oldest; /* the oldest's epoch + 1, or 0: read without the lock */
    char pad1[128];
    stripe_lock stripes[STRIPES];
    idtab ids[STRIPES];        /* subscriber -> id, each under its stripe lock */
    /* written when ids die while pins are open, and when handles come and go */
    cst_mutex meta;            /* deaths, handles */
    _Atomic int64_t seq;       /* one order for births, pins and deaths (rule 3) */
    idmap died;                /* id -> seq of its death while pins were open */
    idmap died_birth;          /* id -> seq of its birth, for the same ids */
    _Atomic size_t died_count; /* died.used, readable without meta (reg_unpin) */
    Counts **handles;          /* the live writable handles' counts (owned refs) */
    size_t nhandles, handles_cap;
    int64_t next_serial;
    PyObject *weakreflist;
    struct Registry *fork_prev, *fork_next; /* every registry, for the fork child */
} Registry;

extern PyTypeObject Registry_Type;

/* The C API the readers and writers use (registry.c). */

/* The registry's locks (stripes, slot_lock, meta) are taken and released
 * through these, never directly: a reference the registry drops while the
 * thread holds one of them (an object whose id is freed, ...) is released,
 * and so any __del__ or weakref callback it runs, only once the thread holds
 * none (reg_defer_decref).  No user code runs under a registry lock: hashes
 * are taken before, == runs with the locks dropped (reg_id_of). */
void reg_lock(cst_mutex *m);
void reg_unlock(cst_mutex *m);
void reg_defer_decref(PyObject *o);

/* The stripe locks one update holds: stripe a, and b (a share group's group)
 * or -1; taken in index order. */
typedef struct reg_locks {
    Registry *r;
    Py_ssize_t a, b;
    unsigned dropped;          /* times reg_id_of dropped them for an == */
} reg_locks;
void reg_locks_take(reg_locks *l);
void reg_locks_drop(reg_locks *l);

/* A subscriber's hash (its stripe is STRIPE(h)); -1 with TypeError for an
 * unhashable one.  Called before any registry lock is taken. */
static inline Py_hash_t reg_hash(PyObject *obj) { return PyObject_Hash(obj); }
/* Under the stripe locks l, which include obj's (h its hash): obj's id (0:
 * none, -1: error) and, in *registered (borrowed, valid while the locks are
 * held), the object registered under it: obj itself or an equal one.  Where
 * a registered object of the same hash but another identity has to be
 * compared with ==, the locks are dropped for the comparison and taken
 * again: nothing read under them before the call may be relied on after. */
int64_t reg_id_of(reg_locks *l, Py_hash_t h, PyObject *obj, PyObject **registered);
/* The same, made if needed (then *fresh = 1: no engine pair has ever named
 * it, and *registered is obj). */
int64_t reg_id_for(reg_locks *l, Py_hash_t h, PyObject *obj, int *fresh, PyObject **registered);
/* Free id, pins or not: only for an id no snapshot can hold.  `registered`
 * is the object registered under id (compared by identity); `visible` 0 for
 * an id no engine pair ever named (no reader can have it: rule 4's count is
 * not raised).  Under its stripe lock. */
int reg_free(Registry *r, Py_hash_t h, uint64_t id, PyObject *registered, int visible);
int reg_added(Counts *c, Py_hash_t h, uint64_t id);
/* Under the stripe lock; `registered` as for reg_free. */
int reg_removed(Registry *r, Counts *c, Py_hash_t h, uint64_t id, PyObject *registered);
int reg_maybe_dead(Registry *r, Counts *c, Py_hash_t h, uint64_t id, PyObject *registered);
static inline int64_t reg_freed(Registry *r)
{
    int64_t n = atomic_load_explicit(r->freed, memory_order_relaxed);
    for (size_t s = 0; s < STRIPES; s++)
        n += atomic_load_explicit(&r->stripes[s].freed, memory_order_relaxed);
    return n;
}
/* A writable handle is gone / a snapshot or a read starts / a snapshot's
 * engine handle exists / a snapshot or a read is over. */
int reg_drop_handle(Registry *r, int64_t serial);
/* A writable copy of handle h whose counts are src: the new Counts (in the
 * family) and, in *copy, the new engine handle; NULL with an exception. */
Counts *reg_copy_handle(Registry *r, Counts *src, cst_trie *h, cst_trie **copy);
int64_t reg_pin(Registry *r);
int64_t reg_read_pin(Registry *r);  /* rule 4's last resort: frees wait for its unpin */
void reg_pin_done(Registry *r, int64_t token);
int reg_unpin(Registry *r, int64_t token);
void registry_after_fork_child(void);
int registry_module_init(PyObject *m);

/* ---------------------------------------------------------------- Reader */
/* An anchor: one reference to a handle's dialect and registry, made by one
 * thread (reader.c, reader_anchor).  A snapshot holds its parent's anchor
 * of the thread that takes it, not the dialect and the registry: on
 * free-threaded CPython a thread changes the reference count of an object
 * it made without an atomic operation, while two threads counting
 * references to one shared object fight over its cache line. */
typedef struct Anchor {
    PyObject_HEAD
    PyObject *dialect;
    Registry *reg;
} Anchor;

#define ANCHOR_SLOTS 64        /* anchors per handle: one per thread number mod 64 (made on
                                  free-threaded builds only) */

typedef struct Reader {
    PyObject_HEAD
    cst_trie *h;               /* the engine handle ... */
    PyObject *handle;          /* ... owned by this cffi cdata (ffi.gc) */
    PyObject *dialect;         /* borrowed from `anchor` when it is set */
    Registry *reg;             /* borrowed from `anchor` when it is set */
    Anchor *anchor;            /* a snapshot's: holds dialect and reg for it */
    _Atomic(Anchor *) *anchors; /* ANCHOR_SLOTS, made by the first snapshot() */
    Counts *counts;            /* writable handles only */
    int64_t pin;               /* a snapshot's pin token (registry rule 3), else 0 */
    PyObject *race_hook;       /* tests: runs after each engine answer */
    PyObject *weakreflist;
    int share_syntax;          /* the dialect has a share syntax ($share/...) */
} Reader;

extern PyTypeObject Reader_Type, Writer_Type;
int reader_module_init(PyObject *m);

/* ---------------------------------------------------------------- groups */
/* Selection policies of a share group (groups.c). */
enum { POLICY_ROUND_ROBIN = 0, POLICY_RANDOM = 1, POLICY_STICKY = 2, POLICY_COUNT = 3 };

typedef struct Group {
    PyObject_HEAD
    PyObject *name;            /* str */
    _Atomic int policy;
    _Atomic uint64_t counter;  /* round-robin: picks made so far */
    PyObject *weakreflist;     /* cstrie.groups.GroupTable holds groups weakly */
} Group;

extern PyTypeObject Group_Type;

/* The content index's hit counting (content.c), module functions. */
extern PyMethodDef content_methods[];

/* The pick callback's argument (cst_pick_fn, cstrie.h). */
typedef struct pick_arg {
    PyObject *objects;         /* the registry's id -> object list */
    uint64_t key;              /* the sticky key's hash, once key_ready */
    int key_ready;             /* 0: hash the topic when a sticky group asks */
    const char *topic;         /* the topic's UTF-8 (the default key) */
    size_t topic_len;
    int torn;                  /* a group id did not name a group: route again */
    /* The groups read during the walk, released after it (pick_release):
     * a last reference dropped inside the engine call could run Python
     * code (weakref callbacks) there. */
    PyObject *held_local[8];
    PyObject **held;
    size_t nheld, heldcap;
} pick_arg;

/* key NULL: the topic is the key, hashed only if a sticky group asks. */
int pick_init(pick_arg *a, PyObject *objects, PyObject *key, const char *topic, size_t len);
void pick_release(pick_arg *a);

int pick_member_index(void *arg, uint64_t share, uint64_t n, uint64_t *k);
/* A key's stable 64-bit hash (str, bytes, int); -1 with TypeError/ValueError. */
int key_hash(PyObject *key, uint64_t *out);
uint64_t key_hash_bytes(const char *p, size_t n);
/* Join (insert 1) or leave group `group` on the encoded pattern as member. */
PyObject *share_update_encoded(Reader *self, PyObject *pattern, const char *s, Py_ssize_t len,
                               PyObject *member, PyObject *group, int insert);
int groups_module_init(PyObject *m);

/* module.c: the Python side of errors, handles and slow paths. */
extern PyObject *py_make_handle;       /* address -> cffi handle (_binding) */
extern PyTypeObject *snapshot_type;    /* cstrie.trie.Snapshot */
PyObject *raise_status(Reader *self, int64_t status, const char *what, PyObject *text);

#endif
