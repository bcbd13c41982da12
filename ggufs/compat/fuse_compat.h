/* What libfuse 3.17 has and Debian 12's libfuse 3.14 has not, in 3.17's shape, for
 * ggufs's FUSE passthrough of model.gguf and the shared mappings of direct_io files
 * with -o edits. With libfuse 3.17 or later, delete this folder and write:
 *   compat_capable(COMPAT_CAP_X)            conn->capable & FUSE_CAP_X (in init)
 *   compat_want(COMPAT_CAP_X)               conn->want |= FUSE_CAP_X
 *   compat_want_stack_depth(d)              conn->max_backing_stack_depth = d
 *   compat_passthrough_open(se, fd)         fuse_passthrough_open(req, fd)
 *   compat_passthrough_close(se, id)        fuse_passthrough_close(req, id)
 *   compat_reply_open(req, fi, id)          fi->backing_id = id; fuse_reply_open(req, fi)
 * (FUSE_CAP_PASSTHROUGH, FUSE_CAP_DIRECT_IO_ALLOW_MMAP: fuse_common.h of 3.17). Only
 * compat_read_fills_cache has no libfuse API yet: it stays, alone, reading the
 * request's FUSE_READ_LOCKOWNER.
 *
 * Behind it (fuse_compat.c), the raw requests and replies of the session through
 * fuse_session_custom_io: INIT's reply gets the flags asked for, and an OPEN's reply
 * the backing id. Every request is read, handled and answered in one thread by libfuse
 * 3.14, so what a reply is to carry is kept for the thread's next reply, in that file. */
#ifndef GGUFS_FUSE_COMPAT_H
#define GGUFS_FUSE_COMPAT_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

/* The capabilities of 3.17 that 3.14 has no flag for. */
enum compat_cap {
	COMPAT_CAP_PASSTHROUGH = 1,            /* FUSE_CAP_PASSTHROUGH */
	COMPAT_CAP_DIRECT_IO_ALLOW_MMAP = 2,   /* FUSE_CAP_DIRECT_IO_ALLOW_MMAP */
};

/* Right after fuse_session_mount, when either capability may be wanted: sees the
 * session's requests and replies. False when libfuse would not let it (nothing is
 * then offered: compat_capable is false, and compat_refused says why). */
bool compat_start(struct fuse_session *se);

/* In the init operation: whether the kernel's INIT offers cap; the kernel's protocol
 * minor version (for a refusal's words). */
bool compat_capable(enum compat_cap cap);
uint32_t compat_kernel_minor(void);
/* In the init operation: INIT's reply is to ask for cap; for passthrough, with this
 * max_stack_depth. */
void compat_want(enum compat_cap cap);
void compat_want_stack_depth(uint32_t depth);
/* Why INIT's reply could not ask for what was wanted (libfuse's reply is not the
 * kernel's size or kind), or NULL when it did (or nothing was wanted yet). */
const char *compat_refused(void);

/* A backing id (> 0) of fd for passthrough opens, or -errno. After INIT. */
int compat_passthrough_open(struct fuse_session *se, int fd);
/* Closes backing id (the kernel keeps the file for the opens and mappings that use it):
 * 0 or -errno. */
int compat_passthrough_close(struct fuse_session *se, int32_t backing_id);
/* fuse_reply_open, with the open passed through to backing_id when > 0 (then without
 * keep_cache, which the kernel refuses with it; direct_io keeps an O_DIRECT open's
 * reads coming to the daemon). */
int compat_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int32_t backing_id);

/* True when the READ this thread serves fills the kernel's page cache (a mapping's
 * page, read-ahead, a splice), false for a read(2) of a direct_io open (or when the
 * requests are not seen). */
bool compat_read_fills_cache(void);

#endif
