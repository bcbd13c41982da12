/* FUSE passthrough for model.gguf on libfuse 3.14, which has no API for it (libfuse
 * 3.17 has fuse_passthrough_open): when model.gguf is byte for byte the model's one
 * local file, an open of it is answered with a backing id of that file, and the
 * kernel reads and maps the file itself, through its own page cache, never asking us.
 *
 * The three pieces of the kernel's protocol (include/uapi/linux/fuse.h, 7.40, and
 * fs/fuse/backing.c, passthrough.c, iomode.c) are put in by seeing the raw requests
 * and replies through fuse_session_custom_io:
 *   - INIT: when the kernel offers FUSE_PASSTHROUGH (flags2) and speaks 7.40 or later,
 *     libfuse's reply gets FUSE_PASSTHROUGH and max_stack_depth 1 (the mount may be the
 *     lower layer of an overlay), or 2 for a model on a stacked file system. The reply
 *     keeps libfuse's own minor version (38): the kernel's fuse_init_out has the same 64
 *     bytes, and max_stack_depth is the word that 7.38 calls unused[0].
 *   - FUSE_DEV_IOC_BACKING_OPEN of the model's fd, once, just after that reply, when
 *     the kernel has set up the connection: one backing id for the mount's life (one
 *     backing file per inode is all the kernel allows), closed before unmount.
 *   - OPEN of model.gguf: libfuse's reply gets FOPEN_PASSTHROUGH (without keep_cache,
 *     which the kernel refuses with it; with direct_io for an O_DIRECT open, whose
 *     reads then still come here) and the backing id in what 7.38 calls padding.
 * A reply is only rewritten when it is the one expected, whole: the reply to the
 * request this thread read last (libfuse 3.14 reads, handles and answers a request in
 * one thread), with its exact size. Anything else goes out as libfuse wrote it.
 *
 * The kernel allows one kind of open per inode at a time (a normal open of a file
 * open with passthrough fails, and the other way round): every open of one model.gguf
 * is of one kind, since with edits each state's model.gguf is an inode of its own
 * (lib/6-tree/tree.h) and whether it is the file is the state's.
 *
 * A local library has many model files, opened and closed as its models are built
 * and released, so there the backing id is per model.gguf inode and lazy: opened at
 * the first open of that inode, kept while it has opens (the kernel also wants one
 * backing file per inode while any is open), closed after the last release; the
 * kernel keeps what live opens and mappings use. A library's inode is one version of
 * one file (lib/7-library/library.h: never reused in a mount), so whether it is the
 * file never changes; an inode the kernel refused a backing id stays refused. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "evlog.h"

#include "ggufs.h"

/* The kernel's ABI, as include/uapi/linux/fuse.h has it (protocol 7.40 and later);
 * Debian 12's headers (linux 6.1, libfuse 3.14) predate it. */
struct pt_in_header {
	uint32_t len, opcode;
	uint64_t unique, nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen, padding;
};
struct pt_out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};
struct pt_init_in {
	uint32_t major, minor, max_readahead, flags, flags2;
	uint32_t unused[11];
};
struct pt_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
	uint16_t request_timeout;
	uint16_t unused[11];
};
struct pt_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};
struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
_Static_assert(sizeof(struct pt_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct pt_out_header) == 16, "fuse_out_header");
_Static_assert(offsetof(struct pt_init_in, flags2) == 16, "fuse_init_in.flags2");
_Static_assert(sizeof(struct pt_init_out) == 64, "fuse_init_out");
_Static_assert(offsetof(struct pt_init_out, flags2) == 32, "fuse_init_out.flags2");
_Static_assert(offsetof(struct pt_init_out, max_stack_depth) == 36, "max_stack_depth");
_Static_assert(sizeof(struct pt_open_out) == 16, "fuse_open_out");
_Static_assert(offsetof(struct pt_open_out, backing_id) == 12, "fuse_open_out.backing_id");
_Static_assert(sizeof(struct pt_backing_map) == 16, "fuse_backing_map");

#define PT_OP_OPEN 14
#define PT_OP_INIT 26
#define PT_KERNEL_VERSION 7
#define PT_MINOR_PASSTHROUGH 40
#define PT_INIT_EXT (1u << 30)
#define PT_WRITEBACK_CACHE (1u << 16)
#define PT_PASSTHROUGH_FLAGS2 (1u << (37 - 32))   /* FUSE_PASSTHROUGH, 1ULL << 37 */
#define PT_FOPEN_DIRECT_IO (1u << 0)
#define PT_FOPEN_PASSTHROUGH (1u << 7)
#define PT_FUSE_SUPER_MAGIC 0x65735546
#define PT_OVERLAYFS_SUPER_MAGIC 0x794c7630
#define PT_ECRYPTFS_SUPER_MAGIC 0xf15f
#define PT_IOC_MAGIC 229
#define PT_IOC_BACKING_OPEN _IOW(PT_IOC_MAGIC, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(PT_IOC_MAGIC, 2, uint32_t)

/* A library's model.gguf inode with a backing id (while opens > 0), or refused one. */
struct pt_file {
	uint64_t ino;
	int32_t backing_id;   /* > 0, or 0: refused (why says why) */
	uint32_t opens;       /* passthrough opens not yet released */
	char why[160];
};

/* The request this thread read last, and the backing id its open reply is to carry
 * (0: none) with its open flags. */
static _Thread_local uint64_t current_unique;
static _Thread_local uint32_t current_opcode;
static _Thread_local int32_t current_backing_id;
static _Thread_local uint32_t current_open_flags;

/* Records why the mount cannot pass through (the first reason stays), and logs it once
 * when the log is running (else at INIT: passthrough_init). Called with pt.lock held. */
static void refuse_locked(struct ggufs *fs, const char *why)
{
	if (fs->pt.refused[0])
		return;
	snprintf(fs->pt.refused, sizeof fs->pt.refused, "%s", why);
	if (fs->pt.log_running) {
		evlog(EVLOG_WARNING, NULL, "model.gguf without passthrough: %s", fs->pt.refused);
		fs->pt.logged = true;
	}
}

static void refuse(struct ggufs *fs, const char *why)
{
	pthread_mutex_lock(&fs->pt.lock);
	refuse_locked(fs, why);
	pthread_mutex_unlock(&fs->pt.lock);
}

/* The custom io's read: the request as the kernel wrote it, noted for the reply. The
 * kernel's INIT says whether it offers passthrough. */
static ssize_t pt_read(int fd, void *buf, size_t len, void *userdata)
{
	struct ggufs *fs = userdata;
	ssize_t r = read(fd, buf, len);
	current_unique = 0;
	current_opcode = 0;
	current_backing_id = 0;
	if (r < (ssize_t)sizeof(struct pt_in_header))
		return r;
	struct pt_in_header in;
	memcpy(&in, buf, sizeof in);
	current_unique = in.unique;
	current_opcode = in.opcode;
	if (in.opcode == PT_OP_INIT) {
		struct pt_init_in init;
		memset(&init, 0, sizeof init);
		size_t have = (size_t)r - sizeof in;
		memcpy(&init, (const char *)buf + sizeof in, have < sizeof init ? have : sizeof init);
		pthread_mutex_lock(&fs->pt.lock);
		fs->pt.kernel_minor = init.minor;
		/* flags2 only exists with FUSE_INIT_EXT, and only 7.40 has the fields */
		fs->pt.offered = init.major == PT_KERNEL_VERSION && init.minor >= PT_MINOR_PASSTHROUGH &&
		                 (init.flags & PT_INIT_EXT) && have >= offsetof(struct pt_init_in, unused) &&
		                 (init.flags2 & PT_PASSTHROUGH_FLAGS2);
		pthread_mutex_unlock(&fs->pt.lock);
	}
	return r;
}

/* After the INIT reply that asked for passthrough went out: the one backing id of the
 * model's file, or the kernel's refusal recorded. On the session's own fd, which stays
 * open until unmount (a clone_fd worker's closes when the worker ends). */
static void open_backing(struct ggufs *fs)
{
	int fd = fuse_session_fd(fs->se);
	if (fs->pt.library) {   /* a backing id per model file, at its first open */
		pthread_mutex_lock(&fs->pt.lock);
		fs->pt.pending = false;
		fs->pt.negotiated = true;
		fs->pt.fuse_fd = fd;
		pthread_cond_broadcast(&fs->pt.settled);
		pthread_mutex_unlock(&fs->pt.lock);
		return;
	}
	/* fs->tree, of the model's own metadata, is the file whenever the model is one
	 * local file (passthrough_start) */
	struct pt_backing_map map = { .fd = tree_model_file_fd(fs->tree) };
	int id = -1, err = 0;
	if (map.fd >= 0) {
		id = ioctl(fd, PT_IOC_BACKING_OPEN, &map);
		err = errno;
	}
	pthread_mutex_lock(&fs->pt.lock);
	fs->pt.pending = false;
	pthread_cond_broadcast(&fs->pt.settled);
	if (map.fd < 0) {
		refuse_locked(fs, "model.gguf is not the file itself");
	} else if (id > 0) {
		fs->pt.backing_id = id;
		fs->pt.fuse_fd = fd;
		if (fs->pt.debug)
			fprintf(stderr, "   passthrough: backing id %d opened for model.gguf\n", id);
	} else {
		char why[sizeof fs->pt.refused];
		snprintf(why, sizeof why, "the kernel refused the backing file "
		         "(FUSE_DEV_IOC_BACKING_OPEN: %s%s)", strerror(id < 0 ? err : EINVAL),
		         id < 0 && err == EPERM ? "; it takes CAP_SYS_ADMIN, and passthrough "
		         "enabled at INIT" : "");
		refuse_locked(fs, why);
	}
	pthread_mutex_unlock(&fs->pt.lock);
}

/* The custom io's writev: libfuse's reply, rewritten when it is INIT's (passthrough
 * asked for) or a passthrough open's; everything else as it is. */
static ssize_t pt_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct ggufs *fs = userdata;
	struct pt_out_header out;
	if (count < 1 || iov[0].iov_len != sizeof out || current_unique == 0)
		return writev(fd, iov, count);
	memcpy(&out, iov[0].iov_base, sizeof out);
	if (out.unique != current_unique)   /* a notification (unique 0), or not ours */
		return writev(fd, iov, count);
	uint32_t opcode = current_opcode;
	int32_t backing_id = current_backing_id;
	uint32_t open_flags = current_open_flags;
	current_unique = 0;
	current_backing_id = 0;
	bool whole2 = count == 2 && out.error == 0;

	if (opcode == PT_OP_INIT) {
		pthread_mutex_lock(&fs->pt.lock);
		bool offered = fs->pt.offered;
		uint32_t minor = fs->pt.kernel_minor;
		pthread_mutex_unlock(&fs->pt.lock);
		if (!offered) {
			if (minor < PT_MINOR_PASSTHROUGH) {
				char why[96];
				snprintf(why, sizeof why, "the kernel speaks FUSE 7.%" PRIu32
				         ", passthrough came with 7.40 (Linux 6.9)", minor);
				refuse(fs, why);
			} else {
				refuse(fs, "the kernel does not offer FUSE passthrough "
				       "(CONFIG_FUSE_PASSTHROUGH)");
			}
			return writev(fd, iov, count);
		}
		struct pt_init_out init;
		if (!whole2 || iov[1].iov_len != sizeof init || out.len != sizeof out + sizeof init) {
			refuse(fs, "libfuse's INIT reply is not the size the kernel's has");
			return writev(fd, iov, count);
		}
		memcpy(&init, iov[1].iov_base, sizeof init);
		if (init.major != PT_KERNEL_VERSION || !(init.flags & PT_INIT_EXT) ||
		    (init.flags & PT_WRITEBACK_CACHE)) {
			refuse(fs, "the connection is not one passthrough goes with");
			return writev(fd, iov, count);
		}
		init.flags2 |= PT_PASSTHROUGH_FLAGS2;
		init.max_stack_depth = fs->pt.stack_depth;
		struct iovec mine[2] = { iov[0], { &init, sizeof init } };
		/* Once the kernel has this reply, other threads may read requests (an open or
		 * a getxattr of model.gguf) before the backing id below is there: they wait
		 * for it (why_not_locked), so that no open of model.gguf is of the wrong kind. */
		pthread_mutex_lock(&fs->pt.lock);
		fs->pt.pending = true;
		pthread_mutex_unlock(&fs->pt.lock);
		ssize_t r = writev(fd, mine, 2);
		if (r >= 0) {
			open_backing(fs);
		} else {
			int e = errno;
			pthread_mutex_lock(&fs->pt.lock);
			fs->pt.pending = false;
			pthread_cond_broadcast(&fs->pt.settled);
			pthread_mutex_unlock(&fs->pt.lock);
			errno = e;
		}
		return r;
	}
	if (opcode == PT_OP_OPEN && backing_id > 0) {
		struct pt_open_out open;
		if (!whole2 || iov[1].iov_len != sizeof open || out.len != sizeof out + sizeof open)
			return writev(fd, iov, count);   /* an error reply: nothing to hand over */
		memcpy(&open, iov[1].iov_base, sizeof open);
		open.open_flags = open_flags;
		open.backing_id = backing_id;
		struct iovec mine[2] = { iov[0], { &open, sizeof open } };
		return writev(fd, mine, 2);
	}
	return writev(fd, iov, count);
}

/* The max_stack_depth for backing files on the file system of fd: 1 lets the mount be
 * the lower layer of an overlay; a file on a stacked file system (a FUSE mount, which
 * may pass through itself, or an overlay) needs 2. */
static uint32_t stack_depth_for(int fd)
{
	struct statfs sfs;
	if (fd >= 0 && fstatfs(fd, &sfs) == 0 &&
	    (sfs.f_type == PT_FUSE_SUPER_MAGIC || sfs.f_type == PT_OVERLAYFS_SUPER_MAGIC ||
	     sfs.f_type == PT_ECRYPTFS_SUPER_MAGIC))
		return 2;
	return 1;
}

void passthrough_start(struct ggufs *fs, struct fuse_session *se, bool off, const char *folder)
{
	const struct ggufs_model *m = fs->model;
	fs->pt.fuse_fd = -1;
	if (off) {
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "off (-o passthrough=no)");
		fs->pt.logged = true;   /* asked for: nothing to say */
		return;
	}
	if (!m && !folder) {
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "a remote library's model");
		fs->pt.logged = true;
		return;
	}
	if (m && (m->remote || m->n_shards != 1)) {
		/* model.gguf is never one local file: no refusal, just what it is */
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "%s",
		         m->remote ? "a remote model" : "a split model, merged here");
		fs->pt.logged = true;
		return;
	}
	if (m) {
		fs->pt.stack_depth = stack_depth_for(tree_model_file_fd(fs->tree));
	} else {
		/* the folder's file system stands for its models' (one on another, through a
		 * symlink, that needs more is refused its backing id: served as before) */
		int dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		fs->pt.stack_depth = stack_depth_for(dfd);
		if (dfd >= 0)
			close(dfd);
		fs->pt.library = true;
	}
	static const struct fuse_custom_io io = { .read = pt_read, .writev = pt_writev };
	if (fuse_session_custom_io(se, &io, fuse_session_fd(se)) != 0)
		snprintf(fs->pt.refused, sizeof fs->pt.refused,
		         "libfuse would not let ggufs see its replies (fuse_session_custom_io)");
}

void passthrough_init(struct ggufs *fs)
{
	pthread_mutex_lock(&fs->pt.lock);
	fs->pt.log_running = true;
	if (fs->pt.refused[0] && !fs->pt.logged) {
		evlog(EVLOG_WARNING, NULL, "model.gguf without passthrough: %s", fs->pt.refused);
		fs->pt.logged = true;
	}
	pthread_mutex_unlock(&fs->pt.lock);
}

/* Closes backing id (under pt.lock): the kernel keeps the file for opens still alive
 * and for mappings, only the id goes. */
static void close_backing_locked(struct ggufs *fs, int32_t backing_id)
{
	uint32_t id = (uint32_t)backing_id;
	if (ioctl(fs->pt.fuse_fd, PT_IOC_BACKING_CLOSE, &id) != 0)
		evlog(EVLOG_WARNING, NULL, "closing backing id %" PRIu32 " of model.gguf: %s", id,
		      strerror(errno));
	else if (fs->pt.debug)
		fprintf(stderr, "   passthrough: backing id %" PRIu32 " closed\n", id);
}

void passthrough_stop(struct ggufs *fs)
{
	pthread_mutex_lock(&fs->pt.lock);
	if (fs->pt.backing_id > 0)
		close_backing_locked(fs, fs->pt.backing_id);
	fs->pt.backing_id = 0;
	for (size_t i = 0; i < fs->pt.n_files; i++)   /* opens not released before the end */
		if (fs->pt.files[i].backing_id > 0)
			close_backing_locked(fs, fs->pt.files[i].backing_id);
	free(fs->pt.files);
	fs->pt.files = NULL;
	fs->pt.n_files = fs->pt.cap_files = 0;
	pthread_mutex_unlock(&fs->pt.lock);
}

/* Why model.gguf of tree t is not the model's file byte for byte. */
static const char *not_the_file(const struct tree *t)
{
	const struct ggufs_model *m = tree_model(t);
	if (m->remote)
		return "a remote model";
	if (m->n_shards != 1)
		return "a split model, merged here";
	return "edited: model.gguf has a header of its own in front of the file's data";
}

/* Library inode ino's entry (under pt.lock), or NULL. */
static struct pt_file *file_of_locked(struct ggufs *fs, uint64_t ino)
{
	for (size_t i = 0; i < fs->pt.n_files; i++)
		if (fs->pt.files[i].ino == ino)
			return &fs->pt.files[i];
	return NULL;
}

/* Why an open of model.gguf of tree t (library inode ino, or 0) now is not a
 * passthrough one (a static or the mount's text), or NULL when it is. Called with
 * pt.lock held. */
static const char *why_not_locked(struct ggufs *fs, const struct tree *t, uint64_t ino)
{
	/* the backing id is being asked for: a moment (one ioctl) */
	while (fs->pt.pending)
		pthread_cond_wait(&fs->pt.settled, &fs->pt.lock);
	if (fs->pt.refused[0])
		return fs->pt.refused;
	if (tree_model_file_fd(t) < 0)
		return not_the_file(t);
	if (fs->pt.library) {
		const struct pt_file *f = file_of_locked(fs, ino);
		if (f && f->backing_id == 0)
			return f->why;
		return fs->pt.negotiated ? NULL : "not negotiated with the kernel yet";
	}
	if (fs->pt.backing_id <= 0)
		return "not negotiated with the kernel yet";
	return NULL;
}

/* The open flags of a passthrough open: O_DIRECT on the file itself would hold the
 * reader to its alignment rules, so its reads come here, as before; its mappings still
 * go to the file. */
static uint32_t open_flags_for(bool direct)
{
	return PT_FOPEN_PASSTHROUGH | (direct ? PT_FOPEN_DIRECT_IO : 0);
}

bool passthrough_open(struct ggufs *fs, const struct tree *t, bool direct)
{
	pthread_mutex_lock(&fs->pt.lock);
	bool pt = why_not_locked(fs, t, 0) == NULL;
	current_backing_id = pt ? fs->pt.backing_id : 0;
	pthread_mutex_unlock(&fs->pt.lock);
	current_open_flags = open_flags_for(direct);
	return pt;
}

/* A new entry for ino in the table (under pt.lock), or NULL out of memory. */
static struct pt_file *file_add_locked(struct ggufs *fs, uint64_t ino)
{
	if (fs->pt.n_files == fs->pt.cap_files) {
		size_t cap = fs->pt.cap_files ? 2 * fs->pt.cap_files : 16;
		struct pt_file *files = realloc(fs->pt.files, cap * sizeof *files);
		if (!files)
			return NULL;
		fs->pt.files = files;
		fs->pt.cap_files = cap;
	}
	struct pt_file *f = &fs->pt.files[fs->pt.n_files++];
	memset(f, 0, sizeof *f);
	f->ino = ino;
	return f;
}

/* A new entry for library inode ino of tree t (under pt.lock) with a backing id of the
 * model's file, or refused by the kernel (said once per cause: every model of a folder
 * may be refused alike); NULL out of memory. */
static struct pt_file *backing_open_locked(struct ggufs *fs, uint64_t ino, const struct tree *t)
{
	struct pt_backing_map map = { .fd = tree_model_file_fd(t) };
	int id = ioctl(fs->pt.fuse_fd, PT_IOC_BACKING_OPEN, &map);
	int err = errno;
	struct pt_file *f = file_add_locked(fs, ino);
	if (!f) {
		if (id > 0)
			close_backing_locked(fs, id);
		return NULL;
	}
	if (id > 0) {
		f->backing_id = id;
		if (fs->pt.debug)
			fprintf(stderr, "   passthrough: backing id %d opened for inode %#" PRIx64 "\n",
			        id, ino);
	} else {
		snprintf(f->why, sizeof f->why, "the kernel refused the backing file "
		         "(FUSE_DEV_IOC_BACKING_OPEN: %s)", strerror(id < 0 ? err : EINVAL));
		evlog(EVLOG_WARNING, f->why, "%s: model.gguf without passthrough: %s",
		      tree_model(t)->path, f->why);
	}
	return f;
}

/* Removes f from the table (under pt.lock), its backing id closed. */
static void file_remove_locked(struct ggufs *fs, struct pt_file *f)
{
	close_backing_locked(fs, f->backing_id);
	*f = fs->pt.files[--fs->pt.n_files];
}

int64_t passthrough_xattr(struct ggufs *fs, const struct tree *t, uint64_t ino, char *buf,
                          size_t size)
{
	pthread_mutex_lock(&fs->pt.lock);
	const char *why = why_not_locked(fs, t, ino);
	if (!why && fs->pt.library && !file_of_locked(fs, ino)) {
		/* never opened: whether the kernel takes the file is known by asking it */
		struct pt_file *f = backing_open_locked(fs, ino, t);
		if (f && f->backing_id > 0)
			file_remove_locked(fs, f);
		else if (f)
			why = f->why;
	}
	char value[256];
	int n = snprintf(value, sizeof value, "%s", why ? why : "yes");
	pthread_mutex_unlock(&fs->pt.lock);
	if (n < 0)
		return -EIO;
	return xattr_value(buf, size, value, (size_t)n < sizeof value ? (size_t)n : sizeof value - 1);
}

bool passthrough_open_ino(struct ggufs *fs, uint64_t ino, const struct tree *t, bool direct)
{
	current_backing_id = 0;
	current_open_flags = open_flags_for(direct);
	pthread_mutex_lock(&fs->pt.lock);
	struct pt_file *f = NULL;
	if (!why_not_locked(fs, t, ino)) {
		f = file_of_locked(fs, ino);
		if (!f)   /* the inode's first open since it had none: its backing id */
			f = backing_open_locked(fs, ino, t);
	}
	/* (out of memory: a normal open, that a passthrough one must not meet; rare) */
	bool pt = f && f->backing_id > 0;
	if (pt) {
		f->opens++;
		current_backing_id = f->backing_id;
	}
	pthread_mutex_unlock(&fs->pt.lock);
	return pt;
}

void passthrough_release(struct ggufs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->pt.lock);
	struct pt_file *f = file_of_locked(fs, ino);
	if (f && f->backing_id > 0 && --f->opens == 0) {
		/* the kernel let go of the inode's backing file at its last release, before
		 * telling us: the next open may bring another id */
		file_remove_locked(fs, f);
	}
	pthread_mutex_unlock(&fs->pt.lock);
}
