/*
 * numbering.c - dense numbers for subscriber ids, in order of first appearance.
 *
 * An export streams a snapshot chunk by chunk and refers to each subscriber by
 * its position in the file's subscriber table: 1 for the first id seen, 2 for
 * the next new one, and so on.  Doing that in Python costs a dict lookup per
 * pair; here it is one pass over the chunk's ids through an open-addressing
 * table, which also reports the chunk's new ids in order, so the caller can
 * append them to its table.  Single-threaded: one numbering per export.
 *
 * cst_count_ids, the other id helper here, counts a bulk build's kept pairs
 * per id for the Python registry, which would otherwise count a million
 * Python ints.
 */
#include <stdlib.h>

#include "internal.h"

struct cst_numbering {
    uint64_t *key;       /* ids; 0 marks an empty slot (id 0 is kept apart) */
    uint64_t *num;       /* the number of key[i] */
    size_t cap;          /* a power of two */
    size_t used;         /* ids numbered (the last number given) */
    uint64_t zero_num;   /* the number of id 0, or 0 when not seen */
};

cst_numbering *cst_numbering_new(void)
{
    cst_numbering *nm = calloc(1, sizeof *nm);
    if (nm == NULL)
        return NULL;
    nm->cap = 1024;
    nm->key = calloc(nm->cap, sizeof *nm->key);
    nm->num = malloc(nm->cap * sizeof *nm->num);
    if (nm->key == NULL || nm->num == NULL) {
        cst_numbering_free(nm);
        return NULL;
    }
    return nm;
}

void cst_numbering_free(cst_numbering *nm)
{
    if (nm == NULL)
        return;
    free(nm->key);
    free(nm->num);
    free(nm);
}

static size_t slot_of(uint64_t id, size_t cap)
{
    return (size_t)((id * UINT64_C(0x9e3779b97f4a7c15)) >> 20) & (cap - 1);
}

static int grow(cst_numbering *nm)
{
    size_t cap = nm->cap * 2;
    uint64_t *key = calloc(cap, sizeof *key);
    uint64_t *num = malloc(cap * sizeof *num);
    if (key == NULL || num == NULL) {
        free(key);
        free(num);
        return -1;
    }
    for (size_t i = 0; i < nm->cap; i++) {
        if (nm->key[i] == 0)
            continue;
        size_t s = slot_of(nm->key[i], cap);
        while (key[s] != 0)
            s = (s + 1) & (cap - 1);
        key[s] = nm->key[i];
        num[s] = nm->num[i];
    }
    free(nm->key);
    free(nm->num);
    nm->key = key;
    nm->num = num;
    nm->cap = cap;
    return 0;
}

int64_t cst_numbering_apply(cst_numbering *nm, const uint64_t *ids, size_t n, uint64_t *refs,
                            uint64_t *fresh)
{
    size_t nfresh = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = ids[i];
        if (id == 0) {
            if (nm->zero_num == 0) {
                nm->zero_num = ++nm->used;
                fresh[nfresh++] = 0;
            }
            refs[i] = nm->zero_num;
            continue;
        }
        /* keep the load under 1/2 */
        if ((nm->used + 1) * 2 > nm->cap && grow(nm) < 0)
            return CST_ENOMEM; /* the numbers given so far stay valid */
        size_t s = slot_of(id, nm->cap);
        while (nm->key[s] != 0 && nm->key[s] != id)
            s = (s + 1) & (nm->cap - 1);
        if (nm->key[s] == 0) {
            nm->key[s] = id;
            nm->num[s] = ++nm->used;
            fresh[nfresh++] = id;
        }
        refs[i] = nm->num[s];
    }
    return (int64_t)nfresh;
}

int cst_count_ids(const uint64_t *ids, const uint8_t *kept, size_t n, uint32_t *counts,
                  uint64_t max_id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] > max_id)
            return CST_EINVAL;
    for (size_t i = 0; i < n; i++)
        counts[ids[i]] += kept == NULL || kept[i];
    return CST_OK;
}
