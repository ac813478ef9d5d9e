/*
 * test_numbering.c - dense numbers for subscriber ids (numbering.c):
 * cst_numbering_apply and cst_count_ids.
 */
#include "unit.h"

/* Numbers in order of first appearance, across calls; id 0 is an id like any
 * other; the table grows past its first size without renumbering. */
void test_numbering(void)
{
    cst_numbering *nm = cst_numbering_new();
    CHECK(nm != NULL);
    uint64_t ids[] = {7, 3, 7, 0, 3, 9}, refs[6], fresh[6];
    CHECK(cst_numbering_apply(nm, ids, 6, refs, fresh) == 4);
    uint64_t want_refs[] = {1, 2, 1, 3, 2, 4}, want_fresh[] = {7, 3, 0, 9};
    CHECK(memcmp(refs, want_refs, sizeof refs) == 0);
    CHECK(memcmp(fresh, want_fresh, sizeof want_fresh) == 0);
    uint64_t again[] = {9, 0, 11};
    CHECK(cst_numbering_apply(nm, again, 3, refs, fresh) == 1);
    CHECK(refs[0] == 4 && refs[1] == 3 && refs[2] == 5 && fresh[0] == 11);
    enum { BIG = 100000 };
    uint64_t *many = malloc(BIG * sizeof *many), *r = malloc(BIG * sizeof *r),
             *f = malloc(BIG * sizeof *f);
    CHECK(many && r && f);
    for (size_t i = 0; i < BIG; i++)
        many[i] = (uint64_t)(BIG - i) * 1000003u; /* none seen before */
    CHECK(cst_numbering_apply(nm, many, BIG, r, f) == BIG);
    int ok = 1;
    for (size_t i = 0; i < BIG; i++)
        ok &= r[i] == 6 + i && f[i] == many[i];
    CHECK(ok);
    CHECK(cst_numbering_apply(nm, ids, 6, refs, fresh) == 0);
    CHECK(memcmp(refs, want_refs, sizeof refs) == 0);
    free(many);
    free(r);
    free(f);
    cst_numbering_free(nm);

    /* cst_count_ids: kept pairs per id; an id above max_id counts nothing */
    uint64_t cids[] = {1, 3, 1, 2, 1};
    uint8_t kept[] = {1, 1, 0, 1, 1};
    uint32_t counts[4] = {0};
    CHECK(cst_count_ids(cids, kept, 5, counts, 3) == CST_OK);
    CHECK(counts[0] == 0 && counts[1] == 2 && counts[2] == 1 && counts[3] == 1);
    uint32_t none[3] = {0};
    CHECK(cst_count_ids(cids, NULL, 5, none, 2) == CST_EINVAL);
    CHECK(none[0] == 0 && none[1] == 0 && none[2] == 0);
}
