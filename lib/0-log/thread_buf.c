#include "thread_buf.h"

#include <stdlib.h>
#include <sys/mman.h>

/* Serializes making the keys: each is made once, by the first thread to need it. */
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether tb's key exists, making it if not (false only if the process is out of
 * keys). */
static bool key_ready(struct thread_buf *tb)
{
	if (atomic_load_explicit(&tb->keyed, memory_order_acquire))
		return true;
	pthread_mutex_lock(&key_lock);
	if (!atomic_load_explicit(&tb->keyed, memory_order_relaxed) &&
	    pthread_key_create(&tb->key, free) == 0)
		atomic_store_explicit(&tb->keyed, true, memory_order_release);
	pthread_mutex_unlock(&key_lock);
	return atomic_load_explicit(&tb->keyed, memory_order_acquire);
}

/* A new buffer of tb->size bytes: malloc'ed, or whole huge pages aligned to one, where
 * the kernel may map each huge page at once ("madvise" or "always" THP). */
static void *buffer_new(const struct thread_buf *tb)
{
	if (!tb->huge)
		return malloc(tb->size);
	size_t bytes = (tb->size + THREAD_BUF_HUGE_PAGE - 1) / THREAD_BUF_HUGE_PAGE *
	               THREAD_BUF_HUGE_PAGE;
	void *p;
	if (posix_memalign(&p, THREAD_BUF_HUGE_PAGE, bytes) != 0)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);   /* a hint: fine if refused */
	return p;
}

void *thread_buf_get(struct thread_buf *tb, size_t size, bool *owned)
{
	*owned = size > tb->size;
	if (*owned)
		return malloc(size);
	if (!key_ready(tb))
		return NULL;
	void *buf = pthread_getspecific(tb->key);
	if (!buf) {
		buf = buffer_new(tb);
		if (buf && pthread_setspecific(tb->key, buf) != 0) {
			free(buf);
			buf = NULL;
		}
	}
	return buf;
}

void thread_buf_put(void *buf, bool owned)
{
	if (owned)
		free(buf);
}
