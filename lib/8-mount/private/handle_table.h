/* Open files by id, for fi->fh. The kernel may still be answering a read of a file
 * (async direct I/O, read-ahead) when its release arrives on another thread, so a file's
 * handle must live until that read is answered: each request finds the handle by id and
 * holds it, and the release frees it only once no request holds it. A request that
 * comes after the release finds nothing (EBADF, to a reader gone). Ids are never 0 and
 * not reused while the process lives (a generation in the high 32 bits). Thread-safe. */
#ifndef GGUFS_HANDLE_TABLE_H
#define GGUFS_HANDLE_TABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct handle_slot;

struct handle_table {
	pthread_mutex_t lock;
	struct handle_slot *slots;
	size_t cap;
	uint32_t generation;
};

#define HANDLE_TABLE_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* Registers p (held once, by the open): its id, or 0 out of memory. */
uint64_t handle_table_add(struct handle_table *tab, void *p);
/* The handle of id, held (handle_table_drop lets go), or NULL once released or for an id
 * never given. */
void *handle_table_take(struct handle_table *tab, uint64_t id);
/* The handle in slot i (below tab->cap), or NULL: for freeing what is left at the end,
 * when no request runs. */
void *handle_table_slot(struct handle_table *tab, size_t i);
/* Lets go of one hold of id; with release, the open's too (once). True when that was
 * the last hold: the id is gone from the table and the caller frees the handle. */
bool handle_table_drop(struct handle_table *tab, uint64_t id, bool release);

#endif
