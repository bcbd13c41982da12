/* The attributes of a tree's files, one rule for every mount that shows a model: a
 * single mount and a model's directory in a library give the same stat for the same
 * file, so du, ls -l and tar see one model alike wherever it is mounted. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tree.h"

void tree_stat(const struct tree *t, const struct tree_node *n, bool editable, struct stat *st)
{
	const struct stat *gs = model_stat(tree_model(t));

	memset(st, 0, sizeof *st);
	st->st_ino = n->ino;
	st->st_mode = tree_mode(n, gs->st_mode);
	st->st_nlink = tree_is_dir(n) ? 2 : 1;
	st->st_uid = gs->st_uid;
	st->st_gid = gs->st_gid;
	if (editable && (n->kind == TREE_META || n->kind == TREE_DIR_METADATA)) {
		/* writable by the mount's owner alone */
		st->st_mode |= S_IWUSR;
		st->st_uid = getuid();
		st->st_gid = getgid();
	}
	st->st_size = (off_t)n->size;
	st->st_blksize = 4096;
	/* du counts the model once: model.gguf holds its bytes; every other file is a
	 * view of them (tensors/NAME, metadata/) or computed from them (.f32, .npy, stats,
	 * gguf.json, summary.txt) and takes no storage of its own. Such a file shows one
	 * block, not 0: GNU tar --sparse archives a file of 0 blocks as all holes (zeros),
	 * and the kernel's lseek (none here) finds no hole in one of 1. */
	st->st_blocks = n->kind == TREE_MODEL ? (blkcnt_t)((n->size + 511) / 512) :
	                n->size && !tree_is_dir(n) ? 1 : 0;
	st->st_atim = gs->st_atim;
	st->st_mtim = gs->st_mtim;
	st->st_ctim = gs->st_ctim;
	struct timespec edited;
	if (tree_edit_time(t, n, &edited))
		st->st_mtim = st->st_ctim = edited;
}
