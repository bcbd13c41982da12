/* libfuse 3.17's passthrough and direct_io mmap on libfuse 3.14 (fuse_compat.h), by
 * the raw FUSE requests and replies of the session, seen through
 * fuse_session_custom_io. Delete with the folder once ggufs requires libfuse 3.17.
 *   - INIT: the request says what the kernel offers (flags2, protocol 7.40 for
 *     passthrough); the reply gets FUSE_PASSTHROUGH with a max_stack_depth, and
 *     FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6), as the init operation wanted;
 *   - OPEN: a passthrough open's reply carries FOPEN_PASSTHROUGH and the backing id
 *     (FUSE_DEV_IOC_BACKING_OPEN of the file, on the session's fd);
 *   - READ: whether the kernel fills its page cache with it (a mapping's page fault,
 *     read-ahead, a splice) or reads for a read(2) past the cache (a direct_io open),
 *     which only the request's FUSE_READ_LOCKOWNER tells: the kernel sets it on every
 *     read of fuse_direct_io (fs/fuse/file.c) and never on a page cache read.
 * The reply rewritten is only the one expected, whole: the reply to the request this
 * thread read last (libfuse 3.14 reads, handles and answers a request in one thread),
 * with its exact size. Anything else goes out as libfuse wrote it. Replies keep
 * libfuse's own minor version (38): the kernel's fuse_init_out has the same 64 bytes,
 * and max_stack_depth is the word that 7.38 calls unused[0]. What is kept per thread
 * between a request and its reply lives in this file only. */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fuse_compat.h"

/* The kernel's ABI, as include/uapi/linux/fuse.h has it (protocol 7.40 and later);
 * Debian 12's headers (linux 6.1, libfuse 3.14) predate it. */
struct wire_in_header {
	uint32_t len, opcode;
	uint64_t unique, nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen, padding;
};
struct wire_out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};
struct wire_init_in {
	uint32_t major, minor, max_readahead, flags, flags2;
	uint32_t unused[11];
};
struct wire_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
	uint16_t request_timeout;
	uint16_t unused[11];
};
struct wire_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};
struct wire_read_in {
	uint64_t fh, offset;
	uint32_t size, read_flags;
	uint64_t lock_owner;
	uint32_t flags, padding;
};
struct wire_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
_Static_assert(sizeof(struct wire_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct wire_out_header) == 16, "fuse_out_header");
_Static_assert(offsetof(struct wire_init_in, flags2) == 16, "fuse_init_in.flags2");
_Static_assert(sizeof(struct wire_init_out) == 64, "fuse_init_out");
_Static_assert(offsetof(struct wire_init_out, flags2) == 32, "fuse_init_out.flags2");
_Static_assert(offsetof(struct wire_init_out, max_stack_depth) == 36, "max_stack_depth");
_Static_assert(sizeof(struct wire_open_out) == 16, "fuse_open_out");
_Static_assert(offsetof(struct wire_open_out, backing_id) == 12, "fuse_open_out.backing_id");
_Static_assert(offsetof(struct wire_read_in, read_flags) == 20, "fuse_read_in.read_flags");
_Static_assert(sizeof(struct wire_backing_map) == 16, "fuse_backing_map");

#define WIRE_OP_OPEN 14
#define WIRE_OP_READ 15
#define WIRE_OP_INIT 26
#define WIRE_KERNEL_VERSION 7
#define WIRE_MINOR_PASSTHROUGH 40
#define WIRE_INIT_EXT (1u << 30)
#define WIRE_WRITEBACK_CACHE (1u << 16)
#define WIRE_PASSTHROUGH_FLAGS2 (1u << (37 - 32))        /* FUSE_PASSTHROUGH, 1ULL << 37 */
#define WIRE_DIO_ALLOW_MMAP_FLAGS2 (1u << (36 - 32))     /* FUSE_DIRECT_IO_ALLOW_MMAP */
#define WIRE_READ_LOCKOWNER (1u << 1)
#define WIRE_FOPEN_DIRECT_IO (1u << 0)
#define WIRE_FOPEN_PASSTHROUGH (1u << 7)
#define WIRE_IOC_MAGIC 229
#define WIRE_IOC_BACKING_OPEN _IOW(WIRE_IOC_MAGIC, 1, struct wire_backing_map)
#define WIRE_IOC_BACKING_CLOSE _IOW(WIRE_IOC_MAGIC, 2, uint32_t)

/* The request this thread read last; for INIT, the kernel's and what the init operation
 * wants of it; for a READ, whether it fills the page cache; for an OPEN, what its reply
 * is to carry (backing id 0: nothing). */
static _Thread_local uint64_t current_unique;
static _Thread_local uint32_t current_opcode;
static _Thread_local bool current_fills_cache;
static _Thread_local struct wire_init_in current_init;
static _Thread_local bool current_init_flags2;   /* the kernel's INIT has flags2 */
static _Thread_local unsigned wanted;            /* enum compat_cap bits */
static _Thread_local uint32_t wanted_depth;
static _Thread_local int32_t reply_backing_id;
static _Thread_local uint32_t reply_open_flags;

/* Whether the session's requests are seen, and why INIT's reply could not ask (set
 * once, at INIT or at the start, then only read). */
static atomic_bool seen;
static _Atomic(const char *) refused;

/* The custom io's read: the request as the kernel wrote it, noted for its reply. */
static ssize_t wire_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t r = read(fd, buf, len);
	current_unique = 0;
	current_opcode = 0;
	current_fills_cache = false;
	reply_backing_id = 0;
	if (r < (ssize_t)sizeof(struct wire_in_header))
		return r;
	struct wire_in_header in;
	memcpy(&in, buf, sizeof in);
	current_unique = in.unique;
	current_opcode = in.opcode;
	size_t have = (size_t)r - sizeof in;
	const char *arg = (const char *)buf + sizeof in;
	if (in.opcode == WIRE_OP_READ && have >= offsetof(struct wire_read_in, lock_owner)) {
		uint32_t read_flags;
		memcpy(&read_flags, arg + offsetof(struct wire_read_in, read_flags), sizeof read_flags);
		current_fills_cache = !(read_flags & WIRE_READ_LOCKOWNER);
	} else if (in.opcode == WIRE_OP_INIT) {
		memset(&current_init, 0, sizeof current_init);
		memcpy(&current_init, arg, have < sizeof current_init ? have : sizeof current_init);
		/* flags2 only exists with FUSE_INIT_EXT, in the 7.36 size of the request */
		current_init_flags2 = current_init.major == WIRE_KERNEL_VERSION &&
		                      (current_init.flags & WIRE_INIT_EXT) &&
		                      have >= offsetof(struct wire_init_in, unused);
		wanted = 0;
	}
	return r;
}

/* libfuse's INIT reply (out, iov) with the flags wanted that it does not know of. */
static ssize_t reply_init(int fd, struct iovec *iov, int count, const struct wire_out_header *out)
{
	struct wire_init_out init;
	if (!wanted)
		return writev(fd, iov, count);
	bool fits = count == 2 && out->error == 0 && iov[1].iov_len == sizeof init &&
	            out->len == sizeof *out + sizeof init;
	if (fits)
		memcpy(&init, iov[1].iov_base, sizeof init);
	if (!fits || init.major != WIRE_KERNEL_VERSION) {
		atomic_store(&refused, "libfuse's INIT reply is not the size the kernel's has");
		return writev(fd, iov, count);
	}
	if (!(init.flags & WIRE_INIT_EXT) || (init.flags & WIRE_WRITEBACK_CACHE)) {
		atomic_store(&refused, "the connection is not one passthrough goes with");
		return writev(fd, iov, count);
	}
	if (wanted & COMPAT_CAP_DIRECT_IO_ALLOW_MMAP)
		init.flags2 |= WIRE_DIO_ALLOW_MMAP_FLAGS2;
	if (wanted & COMPAT_CAP_PASSTHROUGH) {
		init.flags2 |= WIRE_PASSTHROUGH_FLAGS2;
		init.max_stack_depth = wanted_depth;
	}
	struct iovec mine[2] = { iov[0], { &init, sizeof init } };
	return writev(fd, mine, 2);
}

/* The custom io's writev: libfuse's reply, rewritten when it is INIT's or a
 * passthrough open's; everything else as it is. */
static ssize_t wire_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	struct wire_out_header out;
	if (count < 1 || iov[0].iov_len != sizeof out || current_unique == 0)
		return writev(fd, iov, count);
	memcpy(&out, iov[0].iov_base, sizeof out);
	if (out.unique != current_unique)   /* a notification (unique 0), or not ours */
		return writev(fd, iov, count);
	uint32_t opcode = current_opcode;
	int32_t backing_id = reply_backing_id;
	current_unique = 0;
	reply_backing_id = 0;

	if (opcode == WIRE_OP_INIT)
		return reply_init(fd, iov, count, &out);
	if (opcode == WIRE_OP_OPEN && backing_id > 0) {
		struct wire_open_out open;
		if (count != 2 || out.error != 0 || iov[1].iov_len != sizeof open ||
		    out.len != sizeof out + sizeof open)
			return writev(fd, iov, count);   /* an error reply: nothing to hand over */
		memcpy(&open, iov[1].iov_base, sizeof open);
		open.open_flags = reply_open_flags;
		open.backing_id = backing_id;
		struct iovec mine[2] = { iov[0], { &open, sizeof open } };
		return writev(fd, mine, 2);
	}
	return writev(fd, iov, count);
}

bool compat_start(struct fuse_session *se)
{
	static const struct fuse_custom_io io = { .read = wire_read, .writev = wire_writev };
	if (fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0) {
		atomic_store(&seen, true);
		return true;
	}
	atomic_store(&refused, "libfuse would not let ggufs see its replies "
	             "(fuse_session_custom_io)");
	return false;
}

bool compat_capable(enum compat_cap cap)
{
	if (!atomic_load(&seen) || current_opcode != WIRE_OP_INIT || !current_init_flags2)
		return false;
	if (cap == COMPAT_CAP_PASSTHROUGH)
		return current_init.minor >= WIRE_MINOR_PASSTHROUGH &&
		       (current_init.flags2 & WIRE_PASSTHROUGH_FLAGS2);
	return current_init.flags2 & WIRE_DIO_ALLOW_MMAP_FLAGS2;
}

uint32_t compat_kernel_minor(void)
{
	return current_opcode == WIRE_OP_INIT ? current_init.minor : 0;
}

void compat_want(enum compat_cap cap)
{
	if (compat_capable(cap))
		wanted |= cap;
}

void compat_want_stack_depth(uint32_t depth)
{
	wanted_depth = depth;
}

const char *compat_refused(void)
{
	return atomic_load(&refused);
}

int compat_passthrough_open(struct fuse_session *se, int fd)
{
	struct wire_backing_map map = { .fd = fd };
	int id = ioctl(fuse_session_fd(se), WIRE_IOC_BACKING_OPEN, &map);
	if (id < 0)
		return -errno;
	return id > 0 ? id : -EINVAL;
}

int compat_passthrough_close(struct fuse_session *se, int32_t backing_id)
{
	uint32_t id = (uint32_t)backing_id;
	return ioctl(fuse_session_fd(se), WIRE_IOC_BACKING_CLOSE, &id) == 0 ? 0 : -errno;
}

int compat_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int32_t backing_id)
{
	if (backing_id > 0 && atomic_load(&seen)) {
		reply_backing_id = backing_id;
		reply_open_flags = WIRE_FOPEN_PASSTHROUGH | (fi->direct_io ? WIRE_FOPEN_DIRECT_IO : 0);
	}
	return fuse_reply_open(req, fi);
}

bool compat_read_fills_cache(void)
{
	return current_fills_cache;
}
