/* The replies that a model's operations (ops.c) and a library's (library_ops.c) make
 * alike: a slice of a text, a listing, statfs, and an extended attribute's value or
 * names. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "ggufs.h"

void reply_slice(fuse_req_t req, const char *text, uint64_t n, size_t size, uint64_t off)
{
	if (!text || off >= n)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, text + off, n - off < size ? (size_t)(n - off) : size);
}

void reply_dir(fuse_req_t req, size_t size, off_t off, fuse_ino_t self, fuse_ino_t parent,
               uint64_t count, dir_child_fn child, void *ctx)
{
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	for (uint64_t pos = off < 0 ? 0 : (uint64_t)off; pos < count + 2; pos++) {
		struct stat st;
		memset(&st, 0, sizeof st);
		const char *name;
		if (pos < 2) {
			name = pos == 0 ? "." : "..";
			st.st_ino = pos == 0 ? self : parent;
			st.st_mode = S_IFDIR;
		} else {
			bool dir = false;
			fuse_ino_t child_ino = 0;
			name = child(ctx, pos - 2, &child_ino, &dir);
			if (!name)
				continue;
			st.st_ino = child_ino;
			st.st_mode = dir ? S_IFDIR : S_IFREG;
		}
		size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st,
		                                (off_t)(pos + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void reply_statfs(fuse_req_t req, uint64_t blocks, uint64_t files, bool read_only)
{
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)blocks;
	sv.f_files = (fsfilcnt_t)files;
	sv.f_namemax = 255;
	sv.f_flag = read_only ? ST_RDONLY : 0;
	fuse_reply_statfs(req, &sv);
}

int64_t xattr_value(char *buf, size_t size, const char *value, size_t len)
{
	if (size && len > size)
		return -ERANGE;
	if (size)
		memcpy(buf, value, len);
	return (int64_t)len;
}

void reply_xattr(fuse_req_t req, int64_t r, const char *buf, size_t size)
{
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
}
