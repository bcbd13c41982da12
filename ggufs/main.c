/* ggufs: mounts a GGUF model file as a directory tree (libfuse3, low level), read-only
 * but for metadata/ with -o edits.
 *
 * The front end only translates between FUSE and lib/: the model is opened and its
 * tree built before anything is mounted, and every operation is a lookup in that tree.
 * This file is the order of things: arguments, mount point, model, mount, serve. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat/fuse_compat.h"
#include "ggufs_config.h"
#include "ggufs.h"
#include "log_escape.h"
#include "mount.h"
#include "mount_process.h"
#include "mount_source.h"
#include "name_kind.h"
#include "open_name.h"

/* Step 1, before anything is opened: takes the arguments into args and o, keeps URLs
 * out of /proc/PID/cmdline (*model_copy: the copy to free) and answers what needs no
 * mount: --help, --version, --diff and --check. True when main has nothing left to do
 * but exit with *ret; false with *ret 1 when a mount is to follow. */
static bool parse_arguments(int argc, char *argv[], struct fuse_args *args,
                            struct cli_opts *o, char **model_copy, int *ret)
{
	*ret = !cli_check(args->argc, args->argv) ? 2 : !cli_parse(args, o) ? 1 : 0;
	if (*ret != 0)
		return true;
	*model_copy = open_name_scrub_args(argc, argv, &o->model);
	*ret = 0;
	if (o->help) {
		cli_usage(argv[0]);
		return true;
	}
	if (o->version) {
		printf("ggufs %s (libfuse %s)\n", GGUFS_VERSION, fuse_pkgversion());
		return true;
	}
	if (o->diff) {
		/* ggufs --diff [--json] A B (cli_parse saw to the rest): nothing mounted */
		char *b_copy = open_name_scrub_args(argc, argv, &o->model_b);
		*ret = diff_models(o);
		free(b_copy);
		return true;
	}
	if (o->check) {
		/* ggufs --check [--json] MODEL.gguf... (cli_parse saw to the rest): nothing
		 * mounted; every URL kept out of /proc/PID/cmdline, as the first is */
		char **copies = calloc((size_t)o->n_operands + 1, sizeof *copies);
		for (int k = 1; copies && k < o->n_operands; k++)
			copies[k] = open_name_scrub_args(argc, argv, &o->operands[k]);
		if (o->n_operands)
			o->operands[0] = o->model;
		*ret = copies ? check_models(o) : 1;
		for (int k = 1; copies && k < o->n_operands; k++)
			free(copies[k]);
		free(copies);
		return true;
	}
	*ret = 1;
	return false;
}

/* Opens -o log=FILE, here in the caller's directory before the daemon moves to "/", and
 * holds early events until the log starts. 0, or -1 after one line on stderr. */
static int start_early_log(struct ggufs *fs, const struct cli_opts *o, const char *mountpoint)
{
	if (o->log_file && (fs->log_fd = report_open_file(o->log_file)) < 0)
		return -1;
	fs->mountpoint = mountpoint;   /* each log line names it */
	report_early(fs);
	return 0;
}

/* -o edits= edits one model file: true, or false after one line on stderr when o names
 * a library (exit 2, a wrong argument). */
static bool edits_fit(const struct cli_opts *o)
{
	if (!o->edits_file || !name_kind_is_library(name_kind_of(o->model)))
		return true;
	log_errf("%s: -o edits= edits one model file, not a library (a folder of models)",
	         o->model);
	return false;
}

/* Step 2, before anything is mounted: opens the library, or the model, its tree and its
 * edits file, into fs->src with its mount (lib/8-mount/mount_source.h). True, or false
 * after one line on stderr. */
static bool open_source(struct ggufs *fs, const struct cli_opts *o, const char *mountpoint)
{
	char err[GGUF_ERR_MAX];
	struct mount_source_opts so = { .names = cli_open_opts(o), .edits_file = o->edits_file,
	                                .mountpoint = mountpoint,
	                                .single_thread = fs->single_thread,
	                                .requantize = o->requantize,
	                                .imatrix = o->imatrix_file,
	                                .recipes = o->recipes_file,
	                                .quant_threads = o->quant_threads };
	so.names.cancelled = watch_ending;   /* transfers end with the mount */
	so.names.cancel_arg = fs;
	so.names.confine = o->allow_other;   /* other users read it: symlinks stay inside */
	if (!mount_source_open(&fs->src, o->model, &so, err)) {
		log_errf("%s", err);
		return false;
	}
	/* passthrough.c answers for model.gguf; an edit tells the kernel what it changed */
	mount_set_passthrough(fs->src.mount, &(struct mount_passthrough){
		.why_not = passthrough_why_not, .arg = fs });
	mount_set_notify(fs->src.mount, &(struct mount_notify){ .forget = ops_forget, .arg = fs });
	return true;
}

/* The mount options ggufs adds to args: fsname and subtype first, so that the user's
 * given later win; ro (but with -o edits) and default_permissions last, so that nothing
 * undoes them: mount(8) passes "rw" unless told otherwise, and is answered with a
 * read-only mount, as for a CD; nosuid and nodev too, which mount(8) turns off with its
 * "suid,dev". 0, or -1 after one line on stderr. */
static int add_mount_options(struct fuse_args *args, const struct cli_opts *o,
                             const struct ggufs *fs)
{
	const char *shown = fs->src.shown;
	char *abs = shown ? NULL : realpath(o->model, NULL);
	int bad = fuse_opt_insert_arg(args, 1, "-osubtype=ggufs") ||
	          cli_insert_escaped_opt(args, 2, "fsname", shown ? shown : abs ? abs : o->model) ||
	          fuse_opt_add_arg(args, fs->src.edits ? "-onosuid,nodev,default_permissions"
	                                           : "-oro,nosuid,nodev,default_permissions");
	free(abs);
	if (bad) {
		log_errf("out of memory");
		return -1;
	}
	return 0;
}

/* The session over fs's mount. NULL when libfuse
 * refused it (it said why). */
static struct fuse_session *new_session(struct fuse_args *args, struct ggufs *fs)
{
	struct fuse_session *se =
		fuse_session_new(args, &ops_table, sizeof ops_table, fs);
	if (!se)
		return NULL;
	fs->se = se;
	return se;
}

/* Step 4, once mounted: passthrough before the first request (INIT) is read, the
 * warnings the user must see said on stderr (a disk cache that cannot be used, no
 * syslog to hear the events), then the daemon detaches (only now may the parent return
 * to the shell), the log starts (from now on stderr may be /dev/null) and the helper
 * threads with it. 0, or -1 when the daemon could not detach. */
static int go_live(struct ggufs *fs, struct fuse_session *se, const struct cli_opts *o,
                   const struct fuse_cmdline_opts *fo)
{
	fs->pt.debug = fo->debug;
	passthrough_start(fs, o->passthrough_arg && strcmp(o->passthrough_arg, "no") == 0,
	                  fs->src.library && !fs->src.remote ? o->model : NULL);
	/* libfuse 3.14 has no API for passthrough nor for shared mappings of direct_io
	 * files (edits): compat/ gives 3.17's */
	if ((fs->pt.wanted || fs->src.edits) && !compat_start(se)) {
		if (fs->pt.wanted)
			passthrough_refuse(fs, compat_refused());
		/* with edits, INIT never asks for shared mappings then: ENODEV */
		if (fs->src.edits)
			log_errf("metadata/, gguf.json and summary.txt map privately only (a shared "
			         "mapping is ENODEV): libfuse would not let ggufs see its replies");
	}
	char what[PATH_MAX + 64];
	if (!mount_point_mounted_at(fs->mountpoint, what, sizeof what, fs->bdi))
		fs->bdi[0] = 0;
	if (fs->src.cache_warning[0])   /* (said where the user sees it, then the log's) */
		log_errf("%s", fs->src.cache_warning);
	report_warn_unheard(fs, fo->foreground);
	if (fuse_daemonize(fo->foreground) != 0)
		return -1;
	report_start(fs, fo->foreground);
	const bool remote = fs->src.remote;
	pthread_t ra_thread;
	if (fs->bdi[0] && !remote && pthread_create(&ra_thread, NULL, readahead_raise, fs) == 0)
		pthread_detach(ra_thread);
	/* the hand-over to a quick remount starts when the kernel ends the session; a
	 * remote mount's stalled transfers end then too, or at a lazy unmount */
	watch_start(fs);
	return 0;
}

/* Step 5: serves requests until unmounted, in one thread (-s) or libfuse's pool. True
 * for a clean unmount, also on SIGTERM/SIGINT/SIGHUP; false when the loop failed. A read
 * of the device that meets the connection being shut down by the unmount while it takes
 * a request gets ECONNABORTED (the kernel's fuse_dev_do_read, racing fuse_abort_conn),
 * which libfuse reports as a failure where ENODEV is its clean end: the session is over
 * all the same, so it counts as an unmount. */
static bool serve(struct fuse_session *se, const struct fuse_cmdline_opts *fo)
{
	int r;
	if (fo->singlethread) {
		r = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *loop = fuse_loop_cfg_create();
		if (!loop)
			return false;
		fuse_loop_cfg_set_clone_fd(loop, (unsigned)fo->clone_fd);
		/* UINT_MAX is libfuse's "not given", which its own setter rejects noisily */
		if (fo->max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(loop, fo->max_idle_threads);
		fuse_loop_cfg_set_max_threads(loop, fo->max_threads);
		r = fuse_session_loop_mt(se, loop);
		fuse_loop_cfg_destroy(loop);
	}
	/* the loop returns -errno on failure, or the signal that ended it */
	return r >= 0 || r == -ECONNABORTED;
}

/* Parses arguments, opens and checks the model and builds its tree, and only then
 * mounts, daemonizes and serves until unmounted; each step that succeeded is undone in
 * the reverse order by the labels at the end. Exit 0 on a clean unmount, 1 when nothing
 * could be mounted (one line on stderr), 2 for wrong arguments. --check runs check.c
 * instead, --diff diff.c, and exits with its status. */
int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct cli_opts o = { 0 };
	struct fuse_cmdline_opts fo = { 0 };
	struct ggufs fs = { .init_lock = PTHREAD_MUTEX_INITIALIZER,
	                    .init_cond = PTHREAD_COND_INITIALIZER,
	                    .log_fd = -1, .watch_wake = -1,
	                    .pt = { .lock = PTHREAD_MUTEX_INITIALIZER } };
	struct fuse_session *se = NULL;
	char *mountpoint = NULL;
	char err[MOUNT_POINT_ERR_MAX];   /* why the mount point is refused */
	char *model_copy = NULL;
	int ret = 1;

	char start_err[GGUF_ERR_MAX];   /* before any thread */
	if (!mount_process_start(start_err)) {
		log_errf("%s", start_err);
		return 1;
	}
	if (parse_arguments(argc, argv, &args, &o, &model_copy, &ret))
		goto out_args;
	if (fuse_parse_cmdline(&args, &fo) != 0)
		goto out_args;
	mountpoint = mount_point_check(o.mountpoint, o.model, o.nonempty, err);
	if (!mountpoint)
		log_errf("%s", err);
	if (!mountpoint || start_early_log(&fs, &o, mountpoint) != 0)
		goto out_cmdline;
	fs.max_read = o.max_read;
	fs.single_thread = fo.singlethread;
	if (!edits_fit(&o)) {
		ret = 2;
		goto out_source;
	}
	if (!open_source(&fs, &o, mountpoint) || !device_check() ||
	    add_mount_options(&args, &o, &fs) != 0)
		goto out_source;
	se = new_session(&args, &fs);
	if (!se)
		goto out_source;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, mountpoint) != 0)
		goto out_signals;
	if (go_live(&fs, se, &o, &fo) != 0)
		goto out_unmount;
	ret = serve(se, &fo) ? 0 : 1;

out_unmount:
	/* first (unless the watcher did at the session's end): a quick remount of the same
	 * model waits for this mount's disk cache entries instead of reading without them */
	watch_stop(&fs);
	watch_leave(&fs);
	passthrough_stop(&fs);   /* while the session's fd is still open */
	fuse_session_unmount(se);
	report_stop(&fs);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_source:
	mount_source_close(&fs.src);
out_cmdline:
	report_stop(&fs);   /* (again, after the mount: it has nothing left to do then) */
	free(mountpoint);
	free(fo.mountpoint);
out_args:
	fuse_opt_free_args(&args);
	cli_free(&o);
	free(model_copy);
	mount_process_end();
	return ret;
}
