/*
 * mix64.h - the 64-bit mixer the engine's rendezvous scores (match.c) and the
 * fast path's key hashes (hotpath/groups.c) share: splitmix64's finalizer, a
 * bijection, so distinct inputs mix apart.
 */
#ifndef CST_MIX64_H
#define CST_MIX64_H

#include <stdint.h>

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

#endif
