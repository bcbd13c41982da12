/* A local file opened once checked (lib/1-bytes/local_check.h): what is read is the file
 * resolved, even when its name is given to another file before it is opened; a FIFO, a
 * device or a folder is refused and never opened (inotify sees no open of them); and
 * the rule that a shard shown under another file's owner and mode lets read at least
 * whom that file lets read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"
#include "open_watch.h"

#include "local_check.h"
#include "scratch_dir.h"

/* scratch_dir/name, into out. */
static void scratch(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", scratch_dir, name);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* The file resolved is the one read, though its name holds another file by the time it
 * is opened; a symbolic link is followed to its target. */
static void test_reads_the_file_resolved(void **state)
{
	(void)state;
	char a[256], b[256], link[256], err[GGUF_ERR_MAX], buf[16] = "";
	scratch(a, sizeof a, "a");
	scratch(b, sizeof b, "b");
	scratch(link, sizeof link, "link");
	write_text(a, "first");
	write_text(b, "second");
	assert_int_equal(symlink("a", link), 0);
	struct stat st;
	int pfd = local_check_resolve(AT_FDCWD, link, &st);
	assert_true(pfd >= 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(rename(b, a), 0);   /* a is "second" now */
	int fd = local_check_reopen(pfd, &st, link, err);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof buf - 1), 5);
	assert_string_equal(buf, "first");
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	close(fd);
	close(pfd);

	/* relative to a folder's descriptor */
	int dfd = open(scratch_dir, O_PATH | O_DIRECTORY);
	assert_true(dfd >= 0);
	pfd = local_check_resolve(dfd, "a", &st);
	assert_true(pfd >= 0);
	close(pfd);
	assert_int_equal(local_check_resolve(dfd, "no-such-file", &st), -ENOENT);
	close(dfd);
	unlink(a);
	unlink(link);
}

/* A FIFO, a character device and a folder are resolved (nothing waits), refused with
 * what they are, and never opened. */
static void test_refuses_unopened(void **state)
{
	(void)state;
	char fifo[256], dev[256], err[GGUF_ERR_MAX];
	scratch(fifo, sizeof fifo, "fifo");
	scratch(dev, sizeof dev, "zero");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	const bool have_dev = mknod(dev, S_IFCHR | 0600, makedev(1, 5)) == 0;   /* /dev/zero's */
	const struct {
		const char *path;
		int r;
		const char *why;
	} cases[] = {
		{ fifo, -EINVAL, "fifo: not a regular file (a FIFO)" },
		{ dev, -EINVAL, "zero: not a regular file (a character device)" },
		{ "/dev/null", -EINVAL, "/dev/null: not a regular file (a character device)" },
		{ scratch_dir, -EISDIR, ": is a directory, not a GGUF file" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (cases[i].path == dev && !have_dev)
			continue;   /* no mknod here (a container without CAP_MKNOD) */
		const bool watched = cases[i].path == fifo || cases[i].path == dev;
		int in = watched ? open_watch(cases[i].path) : -1;
		struct stat st;
		int pfd = local_check_resolve(AT_FDCWD, cases[i].path, &st);
		assert_true(pfd >= 0);
		assert_int_equal(local_check_reopen(pfd, &st, cases[i].path, err), cases[i].r);
		if (!strstr(err, cases[i].why))
			print_error("%s\n", err);
		assert_non_null(strstr(err, cases[i].why));
		close(pfd);
		if (watched)
			assert_int_equal(open_watch_count(in), 0);
	}
	/* the watch sees an open where there is one */
	int in = open_watch(fifo);
	int fd = open(fifo, O_RDONLY | O_NONBLOCK);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(open_watch_count(in), 1);
	unlink(fifo);
	if (have_dev)
		unlink(dev);
}

/* A stat of owner uid, group gid and mode. */
static struct stat st_of(uid_t uid, gid_t gid, mode_t mode)
{
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_uid = uid;
	st.st_gid = gid;
	st.st_mode = S_IFREG | mode;
	return st;
}

/* Who may read a shard: the first file's owner, and at least its read bits; with
 * another group, both group and others where the first lets its group or others. */
static void test_reads_rule(void **state)
{
	(void)state;
	const struct {
		uid_t uid;
		gid_t gid;
		mode_t first, shard;
		bool ok;
		const char *why;
	} cases[] = {
		{ 1000, 100, 0644, 0644, true, NULL },
		{ 1000, 100, 0644, 0444, true, NULL },
		{ 1000, 100, 0600, 0600, true, NULL },
		{ 1000, 100, 0600, 0644, true, NULL },
		{ 1000, 100, 0640, 0640, true, NULL },
		{ 0, 100, 0644, 0644, false, "owned by uid 0, not by uid 1000 as the first file is" },
		{ 1000, 100, 0644, 0600, false, "its mode 600 (group 100) lets fewer users read it" },
		{ 1000, 100, 0644, 0640, false, "lets fewer" },
		{ 1000, 100, 0640, 0600, false, "lets fewer" },
		{ 1000, 100, 0600, 0200, false, "lets fewer" },
		/* another group: group and others both, where the first lets either */
		{ 1000, 200, 0600, 0600, true, NULL },
		{ 1000, 200, 0640, 0644, true, NULL },
		{ 1000, 200, 0604, 0644, true, NULL },
		{ 1000, 200, 0640, 0640, false, "(group 200)" },
		{ 1000, 200, 0640, 0604, false, "lets fewer" },
		{ 1000, 200, 0604, 0604, false, "lets fewer" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char why[GGUF_ERR_MAX] = "";
		const struct stat first = st_of(1000, 100, cases[i].first);
		const struct stat shard = st_of(cases[i].uid, cases[i].gid, cases[i].shard);
		bool ok = local_check_reads(&first, &shard, why);
		if (ok != cases[i].ok || (cases[i].why && !strstr(why, cases[i].why)))
			print_error("case %zu: %d '%s'\n", i, ok, why);
		assert_int_equal(ok, cases[i].ok);
		if (cases[i].why)
			assert_non_null(strstr(why, cases[i].why));
	}
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_reads_the_file_resolved),
	cmocka_unit_test(test_refuses_unopened),
	cmocka_unit_test(test_reads_rule),
)
