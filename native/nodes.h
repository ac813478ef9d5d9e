/*
 * nodes.h - the node kinds of the concurrent subscription trie.
 *
 * A pattern is a sequence of words.  Each TOPIC LEVEL (the words that may
 * follow a given prefix) is a Ctrie: a hash trie over the words' 64-bit hashes,
 * CN_BITS (5) bits per HASH LEVEL, whose only mutable cells are I-nodes.
 *
 *   trie handle                      one topic level (hash levels 0, 5, 10, ...)
 *   +--------+
 *   | root --+--> I-node -----> C-node (hash level 0)
 *   +--------+    | gen  |      | prev (GCAS) | gen | bitmap | specmask |
 *                 | main-+--+   | array: [spec: * # root-word share][branch ...]|
 *                 +------+  |   +-----+-----------------+-----------------+
 *                           |         |                 |
 *            (GCAS target)  |         v                 v
 *                           |      I-node (deeper     S-node "word"
 *                           |      hash level)        | hash | wkind | nsubs |
 *                           |                         | subs: one id or --+--> set node (CHAMP)
 *                           +--> T-node (tomb)        | child I-node -----+--> next topic level
 *                           |    | S-node or NULL |   | word bytes ...    |
 *                           +--> L-node (full 64-bit hash collisions)
 *                                | n | S-node ... |
 *
 * Main nodes (C-node, T-node, L-node) carry the GCAS `prev` field.  `prev` is
 * NULL (committed), a main node (a GCAS in progress) or FAILED(main) - the
 * failed-node marker of the Ctrie paper, encoded as a tagged pointer so that
 * marking a GCAS failed never allocates.
 *
 * The wildcard words of a topic level (the dialect's one-level and many-level
 * tokens) never enter the hash trie: the level's hash-level-0 C-node keeps them
 * in "spec" slots after its hashed branches, so a lookup reaches them in O(1).
 * The top C-node of a trie also keeps the S-node of the zero-word pattern
 * (the AMQP empty routing key) in a spec slot.
 *
 * Shared subscriptions (share groups, queue groups): the members of group g
 * on pattern P hang below P's S-node, in the spec slot W_SHARE of the next
 * topic level, as one more level of 8-byte literal words, one per group id:
 *
 *   S-node "P's last word" --child--> C-node [spec W_SHARE] --> S-node (share
 *     marker, no word, no subscribers) --child--> C-node (hashed) --> S-node
 *     "gid" (8 bytes, little-endian) | subscribers = the group's members |
 *
 * A lookup never reads the W_SHARE slot (so P's matches and every cost of a
 * lookup stay as they were); a route (match.c) reads it at each S-node that
 * matched the whole topic.  Updates, snapshots, cleanup and reclamation treat
 * the two extra words like any other, so groups are as lock-free, as
 * persistent and as cheap to snapshot as ordinary subscriptions.
 *
 * Every node starts with cst_hdr: an atomic reference count and the kind.
 * References are owned by: a trie handle's root, an I-node's main, a C-node's
 * branches, an S-node's child and subscriber set, a T-node's S-node, an
 * L-node's S-nodes, and - while a GCAS is pending - the new main's prev.
 * A reference that readers may have seen is dropped through EBR (ebr_retire);
 * a node that reaches count zero frees itself and drops its own references at
 * once (everything reachable only through it is unreachable for every open
 * epoch section).  See trie.c, "Reclamation".
 */
#ifndef CSTRIE_NODES_H
#define CSTRIE_NODES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Population count.  Without -mpopcnt (the x86-64 baseline that wheels and
 * default builds target) __builtin_popcount is a call into libgcc, which was
 * 8% of a lookup's instructions: inline the bit-slicing count instead. */
static inline int popc(uint32_t x)
{
#if defined(__POPCNT__) || !(defined(__x86_64__) || defined(__i386__))
    return __builtin_popcount(x);
#else
    x = x - ((x >> 1) & 0x55555555u);
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    x = (x + (x >> 4)) & 0x0f0f0f0fu;
    return (int)((x * 0x01010101u) >> 24);
#endif
}

/* Hash bits per hash level: a C-node has up to 1 << CN_BITS hashed branches.
 * 5 (32-way), as in the paper.  6 (64-way, -DCN_BITS=6) sends fewer literal
 * probes of a level of 17-30 words through a collision (22-37% against
 * 40-55%: each collision is two more dependent misses, the deeper I-node and
 * its C-node), so lookups at 1M filters take 6-8% less and batches 15-20%;
 * but every copy of a C-node that is shared (each write after a snapshot
 * renews its path, R6's transfer does not apply) retains up to twice as many
 * children, and the header grows by 8 bytes: writes after a snapshot cost
 * 25-35% more and bytes per subscription 6% more (docs/benchmarks.md,
 * "64-way C-nodes"). */
#ifndef CN_BITS
#define CN_BITS 5
#endif
#if CN_BITS < 1 || CN_BITS > 6
#error "CN_BITS must be 1..6: a C-node's bitmap is at most 64 bits"
#endif
#if CN_BITS <= 5
typedef uint32_t cnmap; /* a C-node's bitmap of hash fragments */
#else
typedef uint64_t cnmap;
#endif
#define CN_BIT(f) ((cnmap)1 << (f))

/* The set bits of a C-node's bitmap (the upper half is 0 at CN_BITS <= 5). */
static inline int popc_map(cnmap x)
{
    return popc((uint32_t)x) + (CN_BITS > 5 ? popc((uint32_t)((uint64_t)x >> 32)) : 0);
}

enum node_kind {
    K_INODE = 1,
    K_CNODE,
    K_TNODE,
    K_LNODE,
    K_SNODE,
    K_SET,
    K_DESC
};

/* Word kinds of an S-node. */
enum word_kind { W_LITERAL = 0, W_SINGLE = 1, W_MULTI = 2, W_EMPTY_PATTERN = 3, W_SHARE = 4 };
#define SPEC_SLOTS 4 /* spec slot s holds the S-node of word kind s+1 */
#define SHARE_ID_BYTES 8 /* a group id's word below a share marker */

typedef struct cst_hdr {
    _Atomic uint32_t rc;
    uint8_t kind;
    uint8_t b1, b2;       /* kind-specific small fields */
    uint8_t b3;           /* HDR_IN_BLOCK, HDR_PADDED (I-nodes) */
} cst_hdr;

/* h.b3: the node's memory was carved from a node block (alloc.h), so it goes
 * back with cst_block_free, not cst_dealloc (see node_free in trie.c); an
 * I-node's HDR_PADDED bit (below) says it takes CST_INODE_PADDED_BYTES. */
#define HDR_IN_BLOCK 1

typedef struct mainnode mainnode;
typedef struct inode inode;
typedef struct snode snode;
typedef struct setnode setnode;

/* Common prefix of C-, T- and L-nodes. */
struct mainnode {
    cst_hdr h;
    _Atomic(uintptr_t) prev;   /* NULL, a mainnode*, or FAILED(mainnode*) */
};

struct inode {
    cst_hdr h;
    uint64_t gen;              /* the generation this I-node belongs to */
    _Atomic(mainnode *) main;
};

/* Padded I-nodes.  The I-nodes of the top topic levels (those whose C-nodes
 * hold words 0 .. CST_PAD_LEVELS-1) are the ones threads updating disjoint
 * subtrees each CAS (t0.*, t1.*, ... under one first level), and they are
 * allocated next to each other (a connection storm, a bulk load): 24 bytes
 * each, two or three to a cache line, so a GCAS on one made every reader and
 * writer of its neighbours miss.  Those I-nodes take CST_INODE_PADDED_BYTES,
 * so that no two of them share a line: no line of one holds another's header
 * or main (16 threads on 16 cores: disjoint-subtree updates +3-8% ops/s,
 * docs/benchmarks.md "16 cores").  They are few (31 + 961 at 1M random
 * 5-level filters: ~0.1 byte per subscription), so deeper I-nodes, one or two
 * per subscription, stay 24 bytes.  h.b3 & HDR_PADDED says which size it is.
 *
 *   padded:  | hdr | gen | main | ...... 96 bytes never written ...... |
 *            0     8     16     24                                   120
 */
#ifndef CST_PAD_LEVELS
#define CST_PAD_LEVELS 3
#endif
#ifndef CST_INODE_PADDED_BYTES
#define CST_INODE_PADDED_BYTES 120 /* >= 64 + sizeof(inode): lines of its own */
#endif
#define HDR_PADDED 2

/* Whether the I-node over the words at topic level `level` is padded. */
static inline int pad_level(size_t level)
{
    const size_t levels = CST_PAD_LEVELS; /* a variable: 0 draws no -Wtype-limits */
    return level < levels;
}

/* A C-node is its header, its spec slots (the wildcard S-nodes of a topic
 * level, at hash level 0 only), its hashed branches, then a tail of the
 * fields lookups never read.  A lookup reads the header, the spec slots and
 * one branch: the spec slots come first so that they share the header's
 * cache line however wide the level is.
 *
 *   | hdr | prev | bitmap | n | spec[0 .. popc(specmask)) | branch[0 .. popc(bitmap)) |
 *   | gen | cached_pairs | xfer | xfer_old |
 */
typedef struct cnode {
    mainnode m;                /* h.b1 = hash level (0, CN_BITS, ...), h.b2 = specmask */
    cnmap bitmap;
    uint32_t n;                /* hashed branches + spec slots */
    cst_hdr *array[];          /* spec snodes, then branches (inode or snode); then the tail */
} cnode;

typedef struct cnode_tail {
    uint64_t gen;
    _Atomic int64_t cached_pairs; /* -1 = unknown; set only in frozen traversals */
    _Atomic int32_t xfer;      /* the children it owns: XFER_ALL, XFER_NONE or one index */
    int32_t xfer_old;          /* a transfer copy: the index its source keeps, or
                                * XFER_NONE; XFER_ALL: not a transfer copy (trie.c) */
} cnode_tail;

static inline cnode_tail *cn_tail(const cnode *cn)
{
    return (cnode_tail *)(void *)((cst_hdr **)cn->array + cn->n);
}

static inline size_t cnode_size(uint32_t n)
{
    return sizeof(cnode) + n * sizeof(cst_hdr *) + sizeof(cnode_tail);
}

/* cnode.xfer: which children a C-node holds references to (see "Transfer
 * copies" in trie.c); k >= 0 means child k only. */
#define XFER_ALL (-1)
#define XFER_NONE (-2)

typedef struct tnode {
    mainnode m;
    snode *sn;                 /* the entombed S-node, or NULL for an empty level */
} tnode;

typedef struct lnode {
    mainnode m;
    uint32_t n;
    snode *sn[];
} lnode;

/* An S-node keeps up to SUBS_INLINE subscriber ids itself, so that a lookup
 * finds a small set on the cache line it already read for the word, and an
 * update of a small set allocates one node; a larger set is a CHAMP
 * (idset.c).  One id (the common case: a filter with one subscriber) sits in
 * the field a set's pointer would take, and costs no byte; two to
 * SUBS_INLINE sit after the word, padded to 8 bytes. */
#define SUBS_INLINE 4

struct snode {
    cst_hdr h;                 /* h.b1 = word kind */
    uint32_t wlen;
    uint32_t nsubs;            /* size of the subscriber set */
    uint64_t hash;
    union {
        setnode *set;          /* nsubs > SUBS_INLINE: the set */
        uint64_t one;          /* nsubs == 1: the id; nsubs 0 or 2..SUBS_INLINE: 0 */
    };
    inode *child;              /* next topic level, or NULL */
    char word[];               /* wlen bytes; then, padded, 2..SUBS_INLINE ids */
};

#define FAILED_BIT ((uintptr_t)1)

#endif
