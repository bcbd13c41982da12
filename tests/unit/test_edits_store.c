/* The edits file on disk (edits_store.h): a missing FILE made by the first save, each
 * save whole with no temporary left; one store at a time (another process is refused
 * with the holder's pid, the lock follows each save's new file); a store that is ending
 * (its mount's leaving run) saves nothing more and is waited for by a new one, and one
 * opened into a leaving that has run is ending at once; what a killed save left removed
 * at open; a symlink, a FIFO, a directory, another user's FILE or directory, or
 * one writable by others refused in one line without blocking; a save larger than a
 * mount loads refused (EFBIG) with FILE unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "edits_file.h"
#include "edits_store.h"
#include "leaving.h"
#include "scratch_dir.h"

#define NOBODY 65534

/* Each test's FILE: fix.json in a directory of its own (scratch_dir, made fresh by
 * setup, removed with all it holds by scratch_dir_remove). */
static char file[96];

static int setup(void **state)
{
	if (scratch_dir_make(state) != 0)
		return -1;
	snprintf(file, sizeof file, "%s/fix.json", scratch_dir);
	return 0;
}

/* How many entries the test's directory holds. */
static int entries(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "exit $(ls -A %s | wc -l)", scratch_dir);
	int r = system(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* The store of path opened and closed at once: what open returned, err filled. */
static int open_once(const char *path, char err[GGUF_ERR_MAX])
{
	struct edits_store *s;
	char *text;
	uint64_t len;
	err[0] = 0;
	int r = edits_store_open(path, NULL, &s, &text, &len, err);
	edits_store_close(s);
	free(text);
	return r;
}

static void test_save_and_load(void **state)
{
	(void)state;
	struct edits_store *s;
	char *text, err[GGUF_ERR_MAX];
	uint64_t len;
	assert_int_equal(edits_store_open(file, NULL, &s, &text, &len, err), 1);   /* missing */
	assert_null(text);
	assert_int_equal(edits_store_save(s, "one\n", 4, err), 0);
	assert_int_equal(edits_store_save(s, "two!\n", 5, err), 0);
	assert_int_equal(entries(), 1);   /* no temporary left beside it */
	/* too large for a mount to load again: refused, FILE as it was */
	edits_store_set_max(s, 8);
	assert_int_equal(edits_store_save(s, "123456789", 9, err), -EFBIG);
	assert_non_null(strstr(err, "more than the 8"));
	edits_store_close(s);
	assert_int_equal(edits_store_open(file, NULL, &s, &text, &len, err), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(text, "two!\n", 5);
	free(text);
	edits_store_close(s);
}

/* A child process opens the store of path: 0 when it was refused with a line naming
 * pid holder, 1 otherwise. */
static int child_refused(const char *path, pid_t holder)
{
	pid_t pid = fork();
	if (pid == 0) {
		char err[GGUF_ERR_MAX], want[64];
		int r = open_once(path, err);
		snprintf(want, sizeof want, "in use by another mount, pid %d (", (int)holder);
		_exit(r == -1 && strstr(err, want) ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void test_one_store_at_a_time(void **state)
{
	(void)state;
	struct edits_store *s;
	char *text, err[GGUF_ERR_MAX];
	uint64_t len;
	assert_int_equal(edits_store_open(file, NULL, &s, &text, &len, err), 1);
	assert_int_equal(edits_store_save(s, "{}\n", 3, err), 0);   /* made: locked */
	assert_int_equal(child_refused(file, getpid()), 0);
	assert_int_equal(edits_store_save(s, "{ }\n", 4, err), 0);  /* a new inode: locked too */
	assert_int_equal(child_refused(file, getpid()), 0);
	edits_store_close(s);
	assert_int_equal(open_once(file, err), 0);   /* free again */
}

/* Seconds on the monotonic clock. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A quick remount on the same FILE: a store that is ending (its leaving run) saves
 * nothing more (EROFS, FILE as it was), and a store opened by another process meanwhile
 * waits for its close, then has FILE and its text; before the leaving, the same open is
 * refused at once. */
static void test_leaving_handed_over(void **state)
{
	(void)state;
	struct edits_store *s;
	char *text, err[GGUF_ERR_MAX];
	uint64_t len;
	struct leaving *leave = leaving_new();
	assert_non_null(leave);
	assert_int_equal(edits_store_open(file, leave, &s, &text, &len, err), 1);
	assert_int_equal(edits_store_save(s, "{\"a\": 1}\n", 9, err), 0);
	double t0 = now_s();
	assert_int_equal(child_refused(file, getpid()), 0);   /* not ending: refused */
	assert_true(now_s() - t0 < EDITS_LEAVING_WAIT_S / 2);  /* at once, not after a wait */
	leaving_run(leave);
	assert_int_equal(edits_store_save(s, "{}\n", 3, err), -EROFS);
	assert_non_null(strstr(err, "the mount is ending"));
	int pipefd[2];
	assert_int_equal(pipe(pipefd), 0);
	pid_t pid = fork();
	if (pid == 0) {   /* the new mount: FILE once the old one let go, with its text */
		close(pipefd[0]);
		edits_store_close(s);   /* its copy of the old store's descriptors (the lock
		                         * ends only with the parent's) */
		struct edits_store *n;
		char *t = NULL, e[GGUF_ERR_MAX];
		uint64_t l = 0;
		double start = now_s();
		int r = edits_store_open(file, NULL, &n, &t, &l, e);
		double waited = now_s() - start;
		if (write(pipefd[1], &waited, sizeof waited) != (ssize_t)sizeof waited)
			_exit(3);
		_exit(r == 0 && l == 9 && memcmp(t, "{\"a\": 1}\n", 9) == 0 ? 0 : 1);
	}
	close(pipefd[1]);
	struct timespec hold = { 0, 400 * 1000000L };   /* the old daemon, slow to exit */
	nanosleep(&hold, NULL);
	edits_store_close(s);
	double waited = 0;
	assert_int_equal(read(pipefd[0], &waited, sizeof waited), (ssize_t)sizeof waited);
	close(pipefd[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(waited >= 0.3);   /* it waited for the close, and was not refused */
	assert_true(waited < EDITS_LEAVING_WAIT_S);
	leaving_free(leave);
}

/* A store opened while its mount ends (its leaving run already) is ending at once: a
 * missing FILE is not made. */
static void test_opened_after_leaving(void **state)
{
	(void)state;
	struct edits_store *s;
	char *text, err[GGUF_ERR_MAX];
	uint64_t len;
	struct leaving *leave = leaving_new();
	assert_non_null(leave);
	leaving_run(leave);
	assert_int_equal(edits_store_open(file, leave, &s, &text, &len, err), 1);
	assert_int_equal(edits_store_save(s, "{}\n", 3, err), -EROFS);
	struct stat st;
	assert_int_equal(stat(file, &st), -1);
	edits_store_close(s);
	leaving_free(leave);
}

/* The refusal names the process that holds FILE's lock, not any process that merely
 * has FILE open (found in /proc/locks: looking at every process's open files stat'ed
 * them all, and one on a hung FUSE mount hung the mount that asked). Here the test
 * itself, whose pid comes first in /proc, has FILE open without the lock, and a child
 * holds it. */
static void test_holder_is_the_locker(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	put_file(file, "{}\n");
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	int ready[2], done[2];
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(done), 0);
	pid_t holder = fork();
	if (holder == 0) {
		struct edits_store *s;
		char *text;
		uint64_t len;
		char c = edits_store_open(file, NULL, &s, &text, &len, err) >= 0 ? 'y' : 'n';
		close(done[1]);
		if (write(ready[1], &c, 1) != 1 || read(done[0], &c, 1) < 0)
			_exit(2);
		_exit(0);
	}
	close(done[0]);
	char c = 0;
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(child_refused(file, holder), 0);
	close(done[1]);
	int status;
	assert_int_equal(waitpid(holder, &status, 0), holder);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(ready[0]);
	close(ready[1]);
	close(fd);
}

static void test_temporaries_removed(void **state)
{
	(void)state;
	char tmp[128], other[128], err[GGUF_ERR_MAX];
	put_file(file, "{}\n");
	snprintf(tmp, sizeof tmp, "%s.tmp.k1lled", file);
	put_file(tmp, "{\"half");
	snprintf(other, sizeof other, "%s/other.json.tmp.abcdef", scratch_dir);
	put_file(other, "not ours");
	assert_int_equal(open_once(file, err), 0);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(access(other, F_OK), 0);
}

static void expect_refused(const char *path, const char *why)
{
	char err[GGUF_ERR_MAX];
	assert_int_equal(open_once(path, err), -1);
	if (!strstr(err, why))
		fail_msg("'%s' does not say '%s'", err, why);
	assert_null(strchr(err, '\n'));
}

static void test_untrusted_refused(void **state)
{
	(void)state;
	char link_to[128], real[128];
	snprintf(real, sizeof real, "%s/real.json", scratch_dir);
	put_file(real, "{}\n");
	/* a symlink is refused, not replaced by a file of ours at the first save */
	assert_int_equal(symlink(real, file), 0);
	expect_refused(file, "is a symlink");
	unlink(file);
	/* a FIFO is refused at once, without waiting for a writer */
	assert_int_equal(mkfifo(file, 0600), 0);
	expect_refused(file, "not a regular file");
	unlink(file);
	assert_int_equal(mkdir(file, 0700), 0);
	expect_refused(file, "not a regular file");
	rmdir(file);
	put_file(file, "{}\n");
	assert_int_equal(chmod(file, 0622), 0);
	expect_refused(file, "writable by group or others (mode 0622)");
	assert_int_equal(chmod(file, 0600), 0);
	if (geteuid() == 0) {   /* another user's FILE, and directory */
		assert_int_equal(chown(file, NOBODY, NOBODY), 0);
		expect_refused(file, "owned by uid 65534");
		assert_int_equal(chown(file, 0, 0), 0);
		assert_int_equal(chown(scratch_dir, NOBODY, NOBODY), 0);
		expect_refused(file, "its directory is owned by uid 65534");
		assert_int_equal(chown(scratch_dir, 0, 0), 0);
	}
	/* a sticky directory everyone may write to, as /tmp */
	assert_int_equal(chmod(scratch_dir, 01777), 0);
	expect_refused(file, "its directory is writable by group or others (mode 1777)");
	assert_int_equal(chmod(scratch_dir, 0700), 0);
	char err[GGUF_ERR_MAX];
	assert_int_equal(open_once(file, err), 0);
	snprintf(link_to, sizeof link_to, "%s/no/such/fix.json", scratch_dir);
	expect_refused(link_to, "its directory: No such file");
}

UNIT_TESTS(cmocka_unit_test_setup_teardown(test_save_and_load, setup, scratch_dir_remove),
           cmocka_unit_test_setup_teardown(test_one_store_at_a_time, setup, scratch_dir_remove),
           cmocka_unit_test_setup_teardown(test_leaving_handed_over, setup, scratch_dir_remove),
           cmocka_unit_test_setup_teardown(test_opened_after_leaving, setup, scratch_dir_remove),
           cmocka_unit_test_setup_teardown(test_holder_is_the_locker, setup, scratch_dir_remove),
           cmocka_unit_test_setup_teardown(test_temporaries_removed, setup, scratch_dir_remove),
           cmocka_unit_test_setup_teardown(test_untrusted_refused, setup, scratch_dir_remove))
