/*
 * idset.c - the persistent set of ids on an S-node (its pattern's
 * subscribers, past SUBS_INLINE of them): a CHAMP over mixed 64-bit ids.
 * See idset.h for the layout.  Nodes are immutable after creation; all
 * functions here are pure with respect to their inputs.
 */
#include "idset.h"

#include <string.h>

#include "alloc.h"

static inline uint64_t mix(uint64_t x)
{
    /* splitmix64 finalizer: a bijection on 64-bit values. */
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

static inline uint32_t frag(uint64_t h, int shift) { return (uint32_t)(h >> shift) & 31u; }
static inline int pc(uint32_t x) { return popc(x); }
static inline size_t node_size(uint32_t dm, uint32_t nm)
{
    return sizeof(setnode) + sizeof(uint64_t) * (size_t)(pc(dm) + pc(nm));
}
static inline setnode *child_at(const setnode *n, int i)
{
    return (setnode *)(uintptr_t)n->slot[pc(n->datamap) + i];
}

/* Retain n's children but child `skip` (-1: none).  Their lines are all
 * requested first: a locked increment waits for its line and lets no later
 * access start, so copying a 32-way node of a big set was 32 misses in a row
 * (one pattern with 100k subscribers: a third of a subscribe). */
static void retain_children(const setnode *n, int skip)
{
    int nn = pc(n->nodemap);
    for (int j = 0; j < nn; j++)
        __builtin_prefetch(child_at(n, j), 1);
    for (int j = 0; j < nn; j++)
        if (j != skip)
            set_retain(child_at(n, j));
}

/* A copy's size, from its source's: the copies below change one id. */
static inline setnode *sized(setnode *m, uint32_t size)
{
    m->size = size;
    return m;
}

/* A node's size, once its slots are filled (its children are finished). */
static setnode *finish(setnode *m)
{
    uint32_t size = (uint32_t)pc(m->datamap);
    for (int i = 0; i < pc(m->nodemap); i++)
        size += child_at(m, i)->size;
    m->size = size;
    return m;
}

static setnode *node_new(uint32_t dm, uint32_t nm)
{
    setnode *n = cst_alloc(node_size(dm, nm));
    if (n == NULL)
        return NULL;
    atomic_init(&n->h.rc, 1);
    n->h.kind = K_SET;
    n->datamap = dm;
    n->nodemap = nm;
    return n;
}

void set_retain(setnode *s)
{
    /* relaxed: taking a reference while another is held orders nothing. */
    atomic_fetch_add_explicit(&s->h.rc, 1, memory_order_relaxed);
}

void set_release(setnode *s)
{
    if (s == NULL)
        return;
    /* acq_rel: the last release must see every write to the node before it
     * frees it (acquire), and our own use must precede that free (release). */
    if (atomic_fetch_sub_explicit(&s->h.rc, 1, memory_order_acq_rel) != 1)
        return;
    int nn = pc(s->nodemap);
    for (int i = 0; i < nn; i++) /* see retain_children */
        __builtin_prefetch(child_at(s, i), 1);
    for (int i = 0; i < nn; i++)
        set_release(child_at(s, i));
    cst_dealloc(s, node_size(s->datamap, s->nodemap));
}

int set_contains(const setnode *s, uint64_t id)
{
    uint64_t h = mix(id);
    for (int shift = 0; s != NULL; shift += 5) {
        uint32_t bit = 1u << frag(h, shift);
        if (s->datamap & bit)
            return s->slot[pc(s->datamap & (bit - 1))] == id;
        if (!(s->nodemap & bit))
            return 0;
        s = child_at(s, pc(s->nodemap & (bit - 1)));
    }
    return 0;
}

/* A node holding a and b, which agree on the hash bits below `shift`. */
static setnode *merge(uint64_t a, uint64_t ha, uint64_t b, uint64_t hb, int shift)
{
    uint32_t fa = frag(ha, shift), fb = frag(hb, shift);
    if (fa != fb) {
        setnode *n = node_new((1u << fa) | (1u << fb), 0);
        if (n == NULL)
            return NULL;
        n->slot[0] = fa < fb ? a : b;
        n->slot[1] = fa < fb ? b : a;
        return finish(n);
    }
    setnode *sub = merge(a, ha, b, hb, shift + 5);
    if (sub == NULL)
        return NULL;
    setnode *n = node_new(0, 1u << fa);
    if (n == NULL) {
        set_release(sub);
        return NULL;
    }
    n->slot[0] = (uint64_t)(uintptr_t)sub;
    return finish(n);
}

setnode *set_pair(uint64_t a, uint64_t b) { return merge(a, mix(a), b, mix(b), 0); }

/* Copy of n with child i replaced by c (c's reference is transferred), of
 * size `size`. */
static setnode *with_child(const setnode *n, int i, setnode *c, uint32_t size)
{
    setnode *m = node_new(n->datamap, n->nodemap);
    if (m == NULL)
        return NULL;
    int nd = pc(n->datamap), nn = pc(n->nodemap);
    memcpy(m->slot, n->slot, sizeof(uint64_t) * (size_t)(nd + nn));
    retain_children(n, i);
    m->slot[nd + i] = (uint64_t)(uintptr_t)c;
    return sized(m, size);
}

static int ins(const setnode *n, uint64_t id, uint64_t h, int shift, setnode **out)
{
    uint32_t bit = 1u << frag(h, shift);
    int nd = pc(n->datamap), nn = pc(n->nodemap);
    if (n->datamap & bit) {
        int di = pc(n->datamap & (bit - 1));
        uint64_t other = n->slot[di];
        if (other == id)
            return 0;
        setnode *sub = merge(other, mix(other), id, h, shift + 5);
        if (sub == NULL)
            return -1;
        setnode *m = node_new(n->datamap & ~bit, n->nodemap | bit);
        if (m == NULL) {
            set_release(sub);
            return -1;
        }
        int ni = pc(n->nodemap & (bit - 1));
        /* ids without `other`, then children with `sub` inserted at ni */
        memcpy(m->slot, n->slot, sizeof(uint64_t) * (size_t)di);
        memcpy(m->slot + di, n->slot + di + 1, sizeof(uint64_t) * (size_t)(nd - di - 1));
        uint64_t *mc = m->slot + nd - 1;
        const uint64_t *oc = n->slot + nd;
        memcpy(mc, oc, sizeof(uint64_t) * (size_t)ni);
        mc[ni] = (uint64_t)(uintptr_t)sub;
        memcpy(mc + ni + 1, oc + ni, sizeof(uint64_t) * (size_t)(nn - ni));
        retain_children(n, -1);
        *out = sized(m, n->size + 1);
        return 1;
    }
    if (n->nodemap & bit) {
        int ni = pc(n->nodemap & (bit - 1));
        setnode *c;
        int r = ins(child_at(n, ni), id, h, shift + 5, &c);
        if (r != 1)
            return r;
        setnode *m = with_child(n, ni, c, n->size + 1);
        if (m == NULL) {
            set_release(c);
            return -1;
        }
        *out = m;
        return 1;
    }
    setnode *m = node_new(n->datamap | bit, n->nodemap);
    if (m == NULL)
        return -1;
    int di = pc(n->datamap & (bit - 1));
    memcpy(m->slot, n->slot, sizeof(uint64_t) * (size_t)di);
    m->slot[di] = id;
    memcpy(m->slot + di + 1, n->slot + di, sizeof(uint64_t) * (size_t)(nd - di + nn));
    retain_children(n, -1);
    *out = sized(m, n->size + 1);
    return 1;
}

int set_insert(setnode *s, uint64_t id, setnode **out) { return ins(s, id, mix(id), 0, out); }

/*
 * Remove id below n.  On 1: *out is the new node, or NULL when the result
 * holds a single id (then in *single) and no children - the CHAMP canonical
 * form inlines such a node into its parent.
 */
static int rm(const setnode *n, uint64_t id, uint64_t h, int shift, setnode **out,
              uint64_t *single)
{
    uint32_t bit = 1u << frag(h, shift);
    int nd = pc(n->datamap), nn = pc(n->nodemap);
    if (n->datamap & bit) {
        int di = pc(n->datamap & (bit - 1));
        if (n->slot[di] != id)
            return 0;
        if (nd == 2 && nn == 0) {
            *out = NULL;
            *single = n->slot[1 - di];
            return 1;
        }
        setnode *m = node_new(n->datamap & ~bit, n->nodemap);
        if (m == NULL)
            return -1;
        memcpy(m->slot, n->slot, sizeof(uint64_t) * (size_t)di);
        memcpy(m->slot + di, n->slot + di + 1, sizeof(uint64_t) * (size_t)(nd - di - 1 + nn));
        retain_children(n, -1);
        *out = sized(m, n->size - 1);
        return 1;
    }
    if (!(n->nodemap & bit))
        return 0;
    int ni = pc(n->nodemap & (bit - 1));
    setnode *c = NULL;
    uint64_t left = 0;
    int r = rm(child_at(n, ni), id, h, shift + 5, &c, &left);
    if (r != 1)
        return r;
    if (c != NULL) {
        setnode *m = with_child(n, ni, c, n->size - 1);
        if (m == NULL) {
            set_release(c);
            return -1;
        }
        *out = m;
        return 1;
    }
    /* The child shrank to one id: inline it here. */
    if (nd == 0 && nn == 1) {
        *out = NULL;
        *single = left;
        return 1;
    }
    uint32_t lbit = 1u << frag(mix(left), shift);
    /* lbit == bit: left shares this slot's fragment. */
    (void)lbit;
    setnode *m = node_new(n->datamap | bit, n->nodemap & ~bit);
    if (m == NULL)
        return -1;
    int di = pc(n->datamap & (bit - 1));
    memcpy(m->slot, n->slot, sizeof(uint64_t) * (size_t)di);
    m->slot[di] = left;
    memcpy(m->slot + di + 1, n->slot + di, sizeof(uint64_t) * (size_t)(nd - di));
    uint64_t *mc = m->slot + nd + 1;
    const uint64_t *oc = n->slot + nd;
    memcpy(mc, oc, sizeof(uint64_t) * (size_t)ni);
    memcpy(mc + ni, oc + ni + 1, sizeof(uint64_t) * (size_t)(nn - ni - 1));
    retain_children(n, ni);
    *out = sized(m, n->size - 1);
    return 1;
}

int set_remove(setnode *s, uint64_t id, setnode **out, uint64_t *left, uint32_t count)
{
    (void)count;
    *left = 0;
    return rm(s, id, mix(id), 0, out, left);
}

uint64_t set_nth(const setnode *s, uint64_t k)
{
    for (;;) {
        uint32_t nd = (uint32_t)pc(s->datamap);
        if (k < nd)
            return s->slot[k];
        k -= nd;
        int nn = pc(s->nodemap), i = 0;
        for (; i < nn - 1 && k >= child_at(s, i)->size; i++)
            k -= child_at(s, i)->size;
        s = child_at(s, i);
    }
}

size_t set_emit(const setnode *s, uint64_t *out)
{
    int nd = pc(s->datamap), nn = pc(s->nodemap);
    /* A loop, not memcpy: a node holds at most 32 ids, mostly a few, and
     * gcc turns a memcpy of unknown size into `rep movsq`, whose start-up
     * cost more than the copy (40% of this function on lookups). */
    for (int i = 0; i < nd; i++)
        out[i] = s->slot[i];
    size_t k = (size_t)nd;
    for (int i = 0; i < nn; i++)
        k += set_emit(child_at(s, i), out + k);
    return k;
}

int64_t set_check(const setnode *s, int depth, uint64_t *count)
{
    if (s->h.kind != K_SET || atomic_load_explicit(&s->h.rc, memory_order_relaxed) == 0)
        return -1;
    if (s->datamap & s->nodemap)
        return -1;
    if (depth > 0 && pc(s->datamap) + pc(s->nodemap) == 0)
        return -1;
    if (depth > 0 && pc(s->datamap) == 1 && s->nodemap == 0)
        return -1; /* CHAMP canonical form: such a node is inlined */
    int64_t nodes = 1;
    uint64_t before = *count;
    *count += (uint64_t)pc(s->datamap);
    for (int i = 0; i < pc(s->nodemap); i++) {
        int64_t r = set_check(child_at(s, i), depth + 1, count);
        if (r < 0)
            return -1;
        nodes += r;
    }
    if (*count - before != s->size)
        return -1; /* a node's size differs from the ids below it */
    return nodes;
}

void set_cursor_init(set_cursor *c, const setnode *s)
{
    c->depth = s ? 1 : 0;
    c->node[0] = s;
    c->pos[0] = 0;
}

size_t set_cursor_next(set_cursor *c, uint64_t *out, size_t cap)
{
    size_t k = 0;
    while (k < cap && c->depth > 0) {
        int d = c->depth - 1;
        const setnode *n = c->node[d];
        uint32_t nd = (uint32_t)pc(n->datamap), nn = (uint32_t)pc(n->nodemap);
        if (c->pos[d] < nd) {
            out[k++] = n->slot[c->pos[d]++];
        } else if (c->pos[d] < nd + nn) {
            const setnode *ch = child_at(n, (int)(c->pos[d] - nd));
            c->pos[d]++;
            c->node[d + 1] = ch;
            c->pos[d + 1] = 0;
            c->depth++;
        } else {
            c->depth--;
        }
    }
    return k;
}

/* Bottom-up construction: bucket the ids by hash fragment, level by level. */
typedef struct keyed {
    uint64_t id, h;
} keyed;

static setnode *build_rec(keyed *k, size_t n, int shift)
{
    size_t count[32] = {0};
    for (size_t i = 0; i < n; i++)
        count[frag(k[i].h, shift)]++;
    uint32_t dm = 0, nm = 0;
    for (unsigned f = 0; f < 32; f++) {
        if (count[f] == 1)
            dm |= 1u << f;
        else if (count[f] > 1)
            nm |= 1u << f;
    }
    /* Sort k by fragment (counting sort into a temporary copy). */
    keyed *tmp = cst_alloc(n * sizeof *tmp);
    if (tmp == NULL)
        return NULL;
    size_t start[32], pos = 0;
    for (unsigned f = 0; f < 32; f++) {
        start[f] = pos;
        pos += count[f];
    }
    size_t fill[32];
    memcpy(fill, start, sizeof fill);
    for (size_t i = 0; i < n; i++)
        tmp[fill[frag(k[i].h, shift)]++] = k[i];
    memcpy(k, tmp, n * sizeof *tmp);
    cst_dealloc(tmp, n * sizeof *tmp);
    setnode *node = node_new(dm, nm);
    if (node == NULL)
        return NULL;
    int nd = pc(dm);
    int di = 0, ni = 0;
    for (unsigned f = 0; f < 32; f++) {
        if (count[f] == 1) {
            node->slot[di++] = k[start[f]].id;
        } else if (count[f] > 1) {
            setnode *child = build_rec(k + start[f], count[f], shift + 5);
            if (child == NULL) {
                /* release what was built so far */
                for (int j = 0; j < ni; j++)
                    set_release((setnode *)(uintptr_t)node->slot[nd + j]);
                cst_dealloc(node, node_size(dm, nm));
                return NULL;
            }
            node->slot[nd + ni++] = (uint64_t)(uintptr_t)child;
        }
    }
    return finish(node);
}

setnode *set_build(const uint64_t *ids, size_t n)
{
    keyed *k = cst_alloc(n * sizeof *k);
    if (k == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        k[i] = (keyed){ids[i], mix(ids[i])};
    setnode *s = build_rec(k, n, 0);
    cst_dealloc(k, n * sizeof *k);
    return s;
}

int set_cursor_done(set_cursor *c)
{
    while (c->depth > 0) {
        int d = c->depth - 1;
        const setnode *n = c->node[d];
        uint32_t total = (uint32_t)(pc(n->datamap) + pc(n->nodemap));
        if (c->pos[d] < total)
            return 0;
        c->depth--;
    }
    return 1;
}
