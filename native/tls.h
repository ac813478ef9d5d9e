/*
 * tls.h - the engine's thread-locals use the initial-exec TLS model: a hot
 * thread-local (the EBR record, the scratch buffers, the allocator's counter
 * set, the dead-node list) is one %fs-relative load instead of a
 * __tls_get_addr call, which dynamic TLS costs in a dlopen'd module.  The
 * engine has about 100 bytes of them (the TLS segment of _native), well
 * within the static TLS surplus that glibc keeps for dlopen'd libraries.
 */
#ifndef CSTRIE_TLS_H
#define CSTRIE_TLS_H

#if defined(__GNUC__)
#define CST_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#else
#define CST_TLS _Thread_local
#endif

#endif
