/* What an open file keeps with -o edits (struct handle, ops_int.h): its id in fi->fh,
 * held by each request that uses it and freed after the last, and the bound on writers
 * of keys open at once. */
#include <stdatomic.h>
#include <stdlib.h>

#include "handle_table.h"
#include "ops_int.h"

/* The open files' handles, by the id fi->fh holds (handle_table.h): a read the kernel
 * still sends after the release arrived on another thread (async direct I/O) holds the
 * handle, and its tree, until it is answered. */
static struct handle_table open_handles = HANDLE_TABLE_INIT;

/* The handle of an open file, held (handle_put it): only with edits (without, model.gguf's
 * fh is a mark); NULL too once released. */
struct handle *handle_of(const struct ggufs *fs, const struct fuse_file_info *fi)
{
	return fs->edits && fi ? handle_table_take(&open_handles, fi->fh) : NULL;
}

/* Lets go of a hold of h (from handle_of; NULL allowed), freeing it after the last. */
void handle_put(const struct fuse_file_info *fi, struct handle *h)
{
	if (h && handle_table_drop(&open_handles, fi->fh, false))
		handle_free(h);
}

/* Gives new handle h its id in fi->fh. False out of memory (h freed). */
bool handle_register(struct fuse_file_info *fi, struct handle *h)
{
	fi->fh = handle_table_add(&open_handles, h);
	if (!fi->fh)
		handle_free(h);
	return fi->fh != 0;
}

/* The open's hold of registered h let go (its release, or an open whose reply failed):
 * freed now, or by the last request that still holds it. */
void handle_unregister(const struct fuse_file_info *fi, struct handle *h)
{
	if (handle_table_drop(&open_handles, fi->fh, true))
		handle_free(h);
}

/* The writers of keys open now, at most EDIT_WRITERS_MAX. */
static atomic_uint key_writers;

/* A writer's place among EDIT_WRITERS_MAX: false when all are taken. */
bool writer_reserve(void)
{
	if (atomic_fetch_add(&key_writers, 1) < EDIT_WRITERS_MAX)
		return true;
	atomic_fetch_sub(&key_writers, 1);
	return false;
}

/* Gives back a place writer_reserve took. */
void writer_release(void)
{
	atomic_fetch_sub(&key_writers, 1);
}

/* A new handle on tree t (which it keeps), or NULL out of memory. */
struct handle *handle_new(struct tree *t, bool writing)
{
	struct handle *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	h->tree = t;
	h->writing = writing;
	return h;
}

/* Frees h with its tree, scratch file and writer place. */
void handle_free(struct handle *h)
{
	if (h->key_writer)
		writer_release();
	tree_release(h->tree);
	scratch_drop(h->scratch);
	pthread_mutex_destroy(&h->lock);
	free(h->text.p);
	free(h);
}
