/* The per-thread buffer: scratch memory that each thread allocates once and keeps for
 * its life, freed when the thread ends. For the hot paths that need a buffer per
 * request: a malloc per request of a large buffer is a fresh mmap whose pages fault in
 * again every time, and a buffer per read would come and go through malloc arenas
 * that keep it. A request larger than the kept size gets a malloc'ed buffer instead.
 *
 * Declare one per use, static, with THREAD_BUF; every thread gets its own of each. */
#ifndef GGUFS_THREAD_BUF_H
#define GGUFS_THREAD_BUF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* A transparent huge page's size on x86-64. */
#define THREAD_BUF_HUGE_PAGE (2u << 20)

struct thread_buf {
	size_t size;        /* bytes of each thread's buffer */
	bool huge;          /* placed and sized in whole huge pages, with MADV_HUGEPAGE */
	atomic_bool keyed;  /* key made */
	pthread_key_t key;
};
#define THREAD_BUF(size_, huge_) { .size = (size_), .huge = (huge_) }

/* A buffer of size bytes: the calling thread's own (kept; *owned false) when size is
 * at most tb->size, else a malloc'ed one that the caller frees (*owned true). NULL when
 * out of memory. */
void *thread_buf_get(struct thread_buf *tb, size_t size, bool *owned);

/* Frees buf if thread_buf_get gave it as owned; a thread's own buffer stays. */
void thread_buf_put(void *buf, bool owned);

#endif
