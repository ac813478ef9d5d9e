/*
 * idset.h - the persistent set of ids on an S-node (the subscribers of its
 * pattern): a CHAMP (compressed hash-array mapped prefix tree) over 64-bit
 * subscriber ids.
 *
 * Nodes are immutable once published and reference counted; insert and remove
 * copy only the O(log32 n) nodes on one path, so adding the 100,000th
 * subscriber to a pattern costs the same as adding the 10th.  The id is mixed
 * by a bijective 64-bit function, so two ids never collide on every level and
 * no collision nodes exist.
 *
 *   setnode: | hdr | datamap | nodemap | size | ids[popcount(datamap)] | children[popcount(nodemap)] |
 *
 * `size` counts the ids below the node, so the k-th id (in set_emit's order:
 * a node's own ids, then its children's) is found in O(log32 n) (set_nth):
 * what a share group's round-robin pick needs at 100,000 members.
 */
#ifndef CSTRIE_IDSET_H
#define CSTRIE_IDSET_H

#include "nodes.h"

struct setnode {
    cst_hdr h;
    uint32_t datamap;
    uint32_t nodemap;
    uint32_t size;             /* ids in this node and below */
    uint64_t slot[];           /* ids, then child pointers */
};

int set_contains(const setnode *s, uint64_t id);
/* 1 = inserted (*out is a new root owning one reference), 0 = present,
 * -1 = out of memory (nothing changed). */
int set_insert(setnode *s, uint64_t id, setnode **out);
/* 1 = removed (*out is the new root or NULL when it would hold < 2 ids and
 * *left receives the one id left, see below), 0 = absent, -1 = out of memory.
 * When the result holds exactly one id, *out is NULL and *left is that id. */
int set_remove(setnode *s, uint64_t id, setnode **out, uint64_t *left, uint32_t count);
/* A new set holding a and b (a != b); NULL when out of memory. */
setnode *set_pair(uint64_t a, uint64_t b);
/* A set of n distinct ids (n >= 2) built bottom-up in O(n log32 n); NULL when
 * out of memory. */
setnode *set_build(const uint64_t *ids, size_t n);
/* The id at index k (< the set's size) of set_emit's order.  O(log32 n). */
uint64_t set_nth(const setnode *s, uint64_t k);
/* Write every id to out (which has room for all); returns how many. */
size_t set_emit(const setnode *s, uint64_t *out);
/* Drop one reference; frees nodes reaching zero. */
void set_release(setnode *s);
void set_retain(setnode *s);
/* Nodes in the set (for stats); checks the CHAMP shape, -1 if broken. */
int64_t set_check(const setnode *s, int depth, uint64_t *count);

/* Iteration cursor for sets too large to emit at once. */
#define SET_MAX_DEPTH 14
typedef struct set_cursor {
    int depth;
    const setnode *node[SET_MAX_DEPTH];
    uint32_t pos[SET_MAX_DEPTH];   /* next slot index (ids first, then children) */
} set_cursor;
void set_cursor_init(set_cursor *c, const setnode *s);
/* Up to cap ids into out; returns how many (0 = done). */
size_t set_cursor_next(set_cursor *c, uint64_t *out, size_t cap);
/* True when the cursor has no id left (it advances past finished nodes). */
int set_cursor_done(set_cursor *c);

#endif
