/* The daemon's front end: the state shared by its FUSE operations, command line,
 * mount-point checks and read-ahead tuning. Nothing in lib/ sees any of this. */
#ifndef GGUFS_GGUFS_H
#define GGUFS_GGUFS_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "errline.h"
#include "mount_point.h"
#include "mount_source.h"
#include "open_name.h"

/* The CLOCK_REALTIME time ms milliseconds (under a second) from now: the deadline of a
 * pthread_cond_timedwait on a condition variable of the default clock. */
static inline struct timespec ggufs_realtime_in_ms(long ms)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += ms * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

struct passthrough_file;

/* passthrough.c: model.gguf handed to the kernel (FUSE passthrough), under lock. */
struct passthrough {
	pthread_mutex_t lock;
	char refused[192];       /* why the mount cannot pass through, or "" */
	bool logged;             /* refused is said (or needs no saying) */
	bool log_running;        /* INIT came: the event log is up, passthrough asked for */
	bool wanted;             /* model.gguf may pass through: INIT asks for it */
	uint32_t stack_depth;    /* max_stack_depth asked for at INIT */
	int32_t backing_id;      /* a single mount's model file's, > 0 once opened */
	bool debug;              /* -d: each backing id opened and closed on stderr */
	/* a local library: the model.gguf inodes that have a backing id now (passthrough
	 * opens), or that the kernel refused one */
	bool library;
	struct passthrough_file *files;
	size_t n_files, cap_files;
};

struct ggufs {
	struct mount_source src;   /* the library or model mounted, and its mount */
	unsigned max_read;   /* -o max_read=N, 0 if not given */
	/* op_init tells the read-ahead thread that the kernel is about to get INIT's reply */
	pthread_mutex_t init_lock;
	pthread_cond_t init_cond;
	bool init_seen;
	bool single_thread;  /* -s: one thread reads and answers every request */
	/* "MAJ:MIN" of the mount, from mountinfo; "" if unknown */
	char bdi[MOUNT_POINT_DEV_MAX];
	/* the watcher of the mount's end (watch.c) */
	struct fuse_session *se;
	const char *mountpoint;  /* absolute */
	atomic_bool ending;      /* the mount is ending: transfers stop */
	pthread_t watch_thread;
	int watch_wake;          /* eventfd: watch_stop wakes the watcher */
	bool watching;
	/* report.c: the event log's destination */
	int log_fd;              /* -o log=FILE, or -1 */
	bool syslog_open;
	struct passthrough pt;
};

/* passthrough.c: FUSE passthrough of model.gguf (libfuse 3.17's way, compat/ on 3.14).
 *
 * Right after fuse_session_mount: wants passthrough when model.gguf may be the model's
 * one local file, or a local library's folder (folder, else NULL) may hold such files,
 * and off (-o passthrough=no) is false; else records why not. */
void passthrough_start(struct ggufs *fs, bool off, const char *folder);
/* Records why the mount cannot pass through (the first reason stays), said once. */
void passthrough_refuse(struct ggufs *fs, const char *why);
/* From the init operation: asks for passthrough when the kernel offers it, or records
 * why not; the event log is up, and a refusal found before it is said now (once). */
void passthrough_init(struct ggufs *fs);
/* Before fuse_session_unmount (which closes the fd): closes every backing id. */
void passthrough_stop(struct ggufs *fs);
/* Replies to the open fi of model.gguf, inode ino (0 on a single mount), whose file is
 * fd (-1: not one file as it lies, not_file says why; path names the model in a log
 * line): passed through when it may be (a single mount's one backing id; in a library
 * the inode's, opened at its first passthrough open and kept while it has such opens:
 * passthrough_release(fs, ino) follows each release, or a reply that failed); else as
 * fuse_reply_open. An inode the kernel refused a backing id is never passed through for
 * the mount's life: every open of one inode must be of one kind. fuse_reply_open's
 * result. */
int passthrough_reply_open(fuse_req_t req, struct ggufs *fs, struct fuse_file_info *fi,
                           uint64_t ino, int fd, const char *not_file, const char *path);
/* An open of ino released: in a library, its backing id closed after the inode's last
 * passthrough open (nothing for an inode without one, nor on a single mount). */
void passthrough_release(struct ggufs *fs, uint64_t ino);

/* For the attribute user.ggufs.passthrough (mount.h's struct mount_passthrough, arg:
 * struct ggufs): why an open of model.gguf inode ino (0 on a single mount) whose file is
 * fd would not pass through, or "yes", into buf. */
void passthrough_why_not(void *arg, uint64_t ino, int fd, const char *not_file,
                         const char *path, char *buf, size_t size);

/* watch.c: starts the thread that, once the kernel has ended the session (an unmount)
 * or the loop has exited, sets fs->ending and hands the mount's disk cache entries and
 * edits file over (watch_leave) while the last requests are still served; and for a
 * remote mount sets fs->ending when the mount has left the mount table (a lazy
 * unmount). False if it could not start (then the hand-over waits for serve() to
 * return). fs->se, fs->src and fs->mountpoint must be set, and fs->bdi ("" when
 * unknown: then only the session is watched). After fuse_daemonize. */
bool watch_start(struct ggufs *fs);
/* Sets fs->ending for good and stops the watcher (before the session is destroyed). */
void watch_stop(struct ggufs *fs);
/* The hand-over of fs->src (its leaving run: once; a later call returns when it is
 * done). */
void watch_leave(struct ggufs *fs);
/* The remote fetcher's cancel callback (arg: struct ggufs). */
bool watch_ending(void *fs);

/* report.c: where the event log (lib/'s evlog.h) goes after the mount. */

/* Opens -o log=FILE for appending (created mode 0600): its fd, or -1 after one line on
 * stderr. Never through a symlink, never waiting on a FIFO; refused unless a regular
 * file with one name, owned by the user mounting and writable by nobody else (a new
 * one: in a directory of the user's that nobody else may write). */
int report_open_file(const char *path);
/* With -o log=FILE, the events said while the mount is made (a remote model's warnings
 * at open) go to FILE already, as every later one will; report_stop ends it. */
void report_early(struct ggufs *fs);
/* Before the daemon detaches: one line on stderr when its event log would go to syslog
 * (no -f, no -o log=FILE) and nothing listens on /dev/log (most containers), naming
 * -o log=FILE. */
void report_warn_unheard(const struct ggufs *fs, bool foreground);
/* Points the event log at fs->log_fd when open, else stderr in the foreground, else
 * syslog (ident ggufs); each line but stderr's names fs->mountpoint. */
void report_start(struct ggufs *fs, bool foreground);
/* Sums up what was counted and not yet said, and closes the log (at unmount). */
void report_stop(struct ggufs *fs);

/* ops.c: every low-level operation, one call of the mount (mount.h) and one reply
 * (userdata: struct ggufs, whose mount is set): a single model's, with edits or not, or
 * a library's. */
extern const struct fuse_lowlevel_ops ops_table;
/* The mount's notices (struct mount_notify, arg: struct ggufs): the kernel forgets what
 * it cached of ino, with its pages when pages. */
void ops_forget(void *arg, uint64_t ino, bool pages);

/* cli.c: the command line. */
struct cli_opts {
	const char *model;
	const char *mountpoint;
	int help;
	int version;
	int nonempty;        /* -o nonempty: mount over a non-empty directory */
	unsigned max_read;   /* -o max_read=N, read here and passed on */
	int allow_other;     /* -o allow_other, read here (a library confines its symlinks)
	                      * and passed on */
	int check;           /* --check: scan each operand, mount nothing */
	const char **operands;   /* every operand in order (--check takes several) */
	int n_operands;
	int diff;            /* --diff: compare model_b with model, mount nothing */
	const char *model_b; /* --diff's second operand */
	int json;            /* --json: the --check or --diff report as JSON */
	/* remote models (http://, https://, hf://) */
	const char *token_file;  /* -o token_file=PATH: the bearer token (else HF_TOKEN) */
	const char *cafile;      /* -o cafile=PATH: CA certificates besides the system's */
	const char *cache_size_arg;  /* -o cache_size=SIZE as given (checked by cli_parse) */
	uint64_t cache_size;     /* and in bytes; 0 if not given */
	const char *cache_dir;   /* -o cache_dir=DIR: the disk cache, or NULL */
	const char *cache_max_arg;  /* -o cache_max=SIZE as given (checked by cli_parse) */
	uint64_t cache_max;      /* and in bytes; 0 if not given */
	unsigned timeout;        /* -o timeout=SECONDS, 0 if not given */
	int s3_anonymous;        /* -o s3_anonymous: s3:// requests unsigned */
	int s3_virtual_host;     /* -o s3_virtual_host: BUCKET.ENDPOINT, not ENDPOINT/BUCKET */
	const char *log_file;    /* -o log=FILE: the event log goes there, or NULL */
	const char *edits_file;  /* -o edits=FILE: metadata/ writable, edits kept there */
	int requantize;      /* -o requantize: quants/ of already quantized models too */
	const char *imatrix_file;  /* -o imatrix=FILE: quants/ under that importance matrix
	                            * (a local file, a URL, hf://, s3://), or NULL */
	const char *recipes_file;  /* -o recipes=FILE: its recipes in quants/, or NULL */
	unsigned quant_threads;   /* -o quant_threads=N, 0 if not given */
	const char *passthrough_arg;  /* -o passthrough=yes|no as given (checked), or NULL */
	const char *outtype;     /* -o outtype=TYPE as given (checked), or NULL: auto */
};

/* Checks every argument before anything is opened or parsed: unknown switches and -o
 * options (that neither ggufs nor libfuse accepts), missing or bad values, and (unless
 * --help or --version asked for nothing else) the operands. True, or false after one
 * line on stderr naming the bad argument (exit 2). */
bool cli_check(int argc, char **argv);
/* Takes MODEL, MOUNTPOINT and ggufs's own options, checked by cli_check, out of args into
 * o, leaving the rest (-f -d -s -o ...) for fuse_parse_cmdline and fuse_session_new
 * (then o->model and o->mountpoint are set unless o->help or o->version). True; or
 * false when libfuse failed (it said why) or out of memory (said). */
bool cli_parse(struct fuse_args *args, struct cli_opts *o);
/* Frees what cli_parse allocated in o: the values of ggufs's text options (which
 * fuse_opt_parse strdup'ed) and the operand list. */
void cli_free(struct cli_opts *o);
/* --help on stdout. */
void cli_usage(const char *prog);
/* o's remote options, and stderr for the notes (and, on a terminal, what a remote open
 * waits for): what the mount, --check and --diff open names with. */
struct open_name_opts cli_open_opts(const struct cli_opts *o);
/* Inserts "-oNAME=VALUE" at position pos, with commas and backslashes in VALUE
 * escaped (fuse_opt_parse undoes that), so that any model path can be the fsname. */
int cli_insert_escaped_opt(struct fuse_args *args, int pos, const char *name,
                           const char *value);

/* device.c: can the kernel's FUSE be reached? (The mount point's own checks are
 * lib's: mount_point.h.) */

/* True when /dev/fuse can be opened for a mount; false after one line on stderr saying
 * what is missing (the device, or access to it: root, its mode or its group), in
 * ggufs's words rather than libfuse's. Checked once the model is open (a bad model is
 * named first), before fuse_session_mount. */
bool device_check(void);

/* check.c: ggufs --check [--json] MODEL|URL... Scans every tensor of each model in turn
 * and reports the unhealthy ones on stdout, one block of lines per model (blocks apart
 * by an empty line; with --json and several models, a JSON array of the reports);
 * returns the exit status of the worst: 0 healthy, 1 unhealthy, 3 when a model cannot
 * be opened or read (one line on stderr, as a mount would say; the next one is still
 * checked). */
int check_models(const struct cli_opts *o);

/* print.c: the reports of --check and --diff on stdout, their progress on stderr. */

/* name_report_opts.progress: the line, "ggufs: LINE", over the last one on stderr (a
 * terminal's); line NULL blanks it out when the scan is over. */
void print_progress(void *arg, const char *line);
/* Writes text (len bytes; freed) on stdout and flushes: true, or false after one line
 * on stderr saying why not. */
bool print_report(char *text, size_t len);

/* diff.c: ggufs --diff [--json] A B. Compares every tensor that B has with the same name
 * and dims as A (A the reference) and prints the report on stdout; returns the exit
 * status: 0 when both models parse and read, 3 when either cannot be opened or read
 * (one line on stderr, as a mount would say). */
int diff_models(const struct cli_opts *o);

/* readahead.c: a thread body (arg: struct ggufs) that raises the mount's read-ahead
 * once INIT has been answered. */
void *readahead_raise(void *arg);

#endif
