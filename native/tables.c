/*
 * tables.c - byte tables for the exporters.
 *
 * A byte table is a blob and the end offset of each item in it: item i is
 * data[end[i-1] .. end[i]) with end[-1] taken as 0 - the layout of the
 * engine's group buffers and of an Arrow string column without its leading 0.
 * Line formats (JSON Lines) are an item of one table followed by an item of
 * another, per pair; cst_interleave writes them in one pass instead of making
 * two Python bytes objects per pair and joining them.
 */
#include <string.h>

#include "internal.h"

static int64_t item_start(const int64_t *end, int64_t i) { return i ? end[i - 1] : 0; }

int64_t cst_interleave(const char *a, const int64_t *a_end, int64_t n, const char *b,
                       const int64_t *b_end, int64_t nb, const uint64_t *refs, char *out)
{
    int64_t size = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = item_start(a_end, i);
        if (refs[i] >= (uint64_t)nb || a_end[i] < s)
            return CST_EINVAL;
        int64_t t = item_start(b_end, (int64_t)refs[i]);
        if (b_end[refs[i]] < t)
            return CST_EINVAL;
        size += a_end[i] - s + b_end[refs[i]] - t;
    }
    if (out == NULL)
        return size;
    char *p = out;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = item_start(a_end, i);
        memcpy(p, a + s, (size_t)(a_end[i] - s));
        p += a_end[i] - s;
        s = item_start(b_end, (int64_t)refs[i]);
        memcpy(p, b + s, (size_t)(b_end[refs[i]] - s));
        p += b_end[refs[i]] - s;
    }
    return size;
}
