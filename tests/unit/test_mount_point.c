/* The mount point's checks (lib/8-mount/mount_point.h): the mount table read from
 * crafted mountinfo text (octal escapes, a path that only starts like a mount's, mounts
 * stacked on the path, lines to pass over), and the checks of a path against real
 * directories in the scratch folder (empty, not empty, a file, missing) with the lines
 * they say. Nothing is mounted: the one mount looked for in this process's own table is
 * /proc's. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"
#include "scratch_dir.h"

#include "mount_point.h"

/* mount_point_find(f, path, what, size, dev) on text as the mount table f would hold
 * it: what it returns (what and dev as they were before when nothing is found). */
static bool find_in(const char *text, const char *path, char *what, size_t size, char *dev)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	assert_non_null(f);
	bool found = mount_point_find(f, path, what, size, dev);
	fclose(f);
	return found;
}

/* That the mount table text has a mount at path, the topmost's "TYPE SOURCE" what and
 * "MAJ:MIN" dev; or, with what NULL, none (then what and dev are left alone). */
static void expect_find(const char *text, const char *path, const char *what,
                        const char *dev)
{
	char got[128] = "untouched", got_dev[MOUNT_POINT_DEV_MAX] = "-";
	assert_int_equal(find_in(text, path, got, sizeof got, got_dev), what != NULL);
	assert_string_equal(got, what ? what : "untouched");
	assert_string_equal(got_dev, what ? dev : "-");
}

static void test_find_escapes(void **state)
{
	(void)state;
	const char *table =
		"26 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
		"44 26 0:39 / /mnt/my\\040models\\011x ro,nosuid shared:7 - fuse.ggufs "
		"/data/a\\040b\\134c.gguf ro,user_id=0\n";
	expect_find(table, "/mnt/my models\tx", "fuse.ggufs /data/a b\\c.gguf", "0:39");
	/* the escaped form is not the path */
	expect_find(table, "/mnt/my\\040models\\011x", NULL, NULL);
	/* a backslash not followed by three octal digits of a byte stays: \4xx is over
	 * 255, \8 and \x not octal, \04 cut short at the end */
	expect_find("5 1 0:5 / /m\\400\\8\\x\\04 rw - tmpfs t\\\\041\\04 rw\n",
	            "/m\\400\\8\\x\\04", "tmpfs t\\!\\04", "0:5");
}

static void test_find_prefix(void **state)
{
	(void)state;
	/* mounts on paths that start like /mnt/models, or that it starts like: none at it */
	const char *table =
		"26 1 254:0 / / rw - ext4 /dev/vda rw\n"
		"30 26 0:30 / /mnt rw - tmpfs tmpfs rw\n"
		"31 30 0:31 / /mnt/models2 rw - fuse.ggufs /a.gguf rw\n"
		"32 30 0:32 / /mnt/models/sub rw - fuse.ggufs /b.gguf rw\n"
		"33 30 0:33 / /mnt/models\\040old rw - fuse.ggufs /c.gguf rw\n";
	expect_find(table, "/mnt/models", NULL, NULL);
	expect_find(table, "/mnt/models2", "fuse.ggufs /a.gguf", "0:31");
	expect_find(table, "/mnt", "tmpfs tmpfs", "0:30");
}

static void test_find_on_path(void **state)
{
	(void)state;
	/* two mounts stacked on the path: the topmost, the later line, is said */
	const char *table =
		"26 1 254:0 / / rw - ext4 /dev/vda rw\n"
		"40 26 0:40 / /srv/m rw,relatime - tmpfs vol rw\n"
		"41 26 0:41 / /srv/other rw - tmpfs other rw\n"
		"42 40 0:42 / /srv/m ro,nosuid,nodev master:3 - fuse.ggufs "
		"https://h.example/m.gguf ro,user_id=0\n";
	expect_find(table, "/srv/m", "fuse.ggufs https://h.example/m.gguf", "0:42");
	/* dev may be NULL; what is cut to its size, never overflowed */
	char what[128], small[8];
	assert_true(find_in(table, "/srv/other", what, sizeof what, NULL));
	assert_string_equal(what, "tmpfs other");
	assert_true(find_in(table, "/srv/m", small, sizeof small, NULL));
	assert_string_equal(small, "fuse.gg");
}

static void test_find_passes_over(void **state)
{
	(void)state;
	/* fewer than five fields, no "-" before the type, a type without a source, an
	 * empty line, a last line without its newline: none is a mount at /x but the last */
	const char *skipped =
		"1 2 0:1 /\n"
		"\n"
		"3 2 0:3 / /x rw shared:1 tmpfs src rw\n"
		"4 2 0:4 / /x rw - tmpfs\n"
		"5 2 0:5 / /x rw -\n";
	char table[256];
	snprintf(table, sizeof table, "%s6 2 0:6 / /x rw - tmpfs last rw", skipped);
	expect_find(table, "/x", "tmpfs last", "0:6");
	expect_find(skipped, "/x", NULL, NULL);
	expect_find("", "/x", NULL, NULL);
}

static void test_mounted_at(void **state)
{
	(void)state;
	/* this process's own table: /proc is mounted (or /proc/self/mountinfo could not be
	 * read: then nothing is), the scratch folder is not */
	char what[PATH_MAX + 64], dev[MOUNT_POINT_DEV_MAX];
	if (access("/proc/self/mountinfo", R_OK) != 0)
		skip();
	assert_true(mount_point_mounted_at("/proc", what, sizeof what, dev));
	assert_memory_equal(what, "proc ", 5);   /* the type; the source is the system's */
	assert_non_null(strchr(dev, ':'));
	assert_false(mount_point_mounted_at(scratch_dir, what, sizeof what, dev));
}

/* path in the scratch folder (a static buffer, one at a time). */
static const char *in_scratch(const char *name)
{
	static char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, name);
	return path;
}

/* mount_point_check(given, model, nonempty) refused: the line it says. */
static void expect_refused(const char *given, const char *model, bool nonempty,
                           const char *line)
{
	char err[MOUNT_POINT_ERR_MAX] = "";
	char *mp = mount_point_check(given, model, nonempty, err);
	assert_null(mp);
	assert_string_equal(err, line);
}

static void test_check_empty(void **state)
{
	(void)state;
	char dir[PATH_MAX], link[PATH_MAX + 16], err[MOUNT_POINT_ERR_MAX];
	snprintf(dir, sizeof dir, "%s", in_scratch("empty"));
	assert_int_equal(mkdir(dir, 0755), 0);
	char *mp = mount_point_check(dir, NULL, false, err);
	assert_non_null(mp);
	char *real = realpath(dir, NULL);
	assert_string_equal(mp, real);
	free(mp);
	/* by a symlink and with "." and "..": the absolute path it names */
	snprintf(link, sizeof link, "%s", in_scratch("link"));
	assert_int_equal(symlink(dir, link), 0);
	mp = mount_point_check(link, NULL, false, err);
	assert_non_null(mp);
	assert_string_equal(mp, real);
	free(mp);
	snprintf(link, sizeof link, "%s/./../empty/", dir);
	mp = mount_point_check(link, NULL, false, err);
	assert_non_null(mp);
	assert_string_equal(mp, real);
	free(mp);
	free(real);
}

static void test_check_not_empty(void **state)
{
	(void)state;
	char dir[PATH_MAX], err[MOUNT_POINT_ERR_MAX], line[2 * PATH_MAX];
	snprintf(dir, sizeof dir, "%s", in_scratch("full"));
	assert_int_equal(mkdir(dir, 0755), 0);
	FILE *f = fopen(in_scratch("full/.hidden"), "w");
	assert_non_null(f);
	fclose(f);
	snprintf(line, sizeof line, "%s: not empty (-o nonempty mounts over it)", dir);
	expect_refused(dir, NULL, false, line);
	/* -o nonempty: mounted over */
	char *mp = mount_point_check(dir, NULL, true, err);
	assert_non_null(mp);
	free(mp);
	/* a folder with a mount on it (this process's /proc) is said to be mounted, by
	 * the table's topmost mount on it */
	char what[PATH_MAX + 64];
	if (mount_point_mounted_at("/proc", what, sizeof what, NULL)) {
		snprintf(line, sizeof line, "/proc: already mounted (%s): unmount it first", what);
		expect_refused("/proc", NULL, false, line);
	}
}

static void test_check_file(void **state)
{
	(void)state;
	char file[PATH_MAX], line[2 * PATH_MAX + 128];
	snprintf(file, sizeof file, "%s", in_scratch("model.gguf"));
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fputs("GGUF", f);
	fclose(f);
	snprintf(line, sizeof line, "%s: not a directory", file);
	expect_refused(file, NULL, false, line);
	/* and the model operand a folder that is not empty, or missing: the same */
	assert_int_equal(mkdir(in_scratch("lib"), 0755), 0);
	f = fopen(in_scratch("lib/a.gguf"), "w");
	assert_non_null(f);
	fclose(f);
	expect_refused(file, in_scratch("lib"), false, line);
	expect_refused(file, in_scratch("nowhere"), false, line);
	/* the model operand an empty folder: the operands were swapped */
	assert_int_equal(mkdir(in_scratch("mnt"), 0755), 0);
	snprintf(line, sizeof line, "%s: not a directory, and %s is an empty one: the "
	         "operands look swapped (ggufs MODEL MOUNTPOINT)", file, in_scratch("mnt"));
	expect_refused(file, in_scratch("mnt"), false, line);
	/* below a file: stat's own error */
	char below[PATH_MAX + 8];
	snprintf(below, sizeof below, "%s/sub", file);
	snprintf(line, sizeof line, "%s: %s", below, strerror(ENOTDIR));
	expect_refused(below, NULL, false, line);
}

static void test_check_missing(void **state)
{
	(void)state;
	char line[4 * PATH_MAX];
	const char *missing = in_scratch("a/b/c");
	snprintf(line, sizeof line,
	         "%s: the mount point does not exist (mkdir -p %s makes it)", missing, missing);
	expect_refused(missing, NULL, false, line);
	/* a relative one, its nearest folder "." (the scratch folder): the same */
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir(scratch_dir), 0);
	expect_refused("ggufs-no-such-folder/x", NULL, false,
	               "ggufs-no-such-folder/x: the mount point does not exist (mkdir -p "
	               "ggufs-no-such-folder/x makes it)");
	assert_int_equal(chdir(cwd), 0);
	/* a long path is said whole (longer than the error line's GGUF_ERR_MAX) */
	char longer[2048];
	int n = snprintf(longer, sizeof longer, "%s", scratch_dir);
	while (n < 1900)
		n += snprintf(longer + n, sizeof longer - (size_t)n, "/%s", "a-long-folder-name");
	snprintf(line, sizeof line,
	         "%s: the mount point does not exist (mkdir -p %s makes it)", longer, longer);
	expect_refused(longer, NULL, false, line);
	/* under a folder that cannot be written: no mkdir -p, that would fail too (a
	 * folder of mode 0555, or for root a read-only one, where there is one) */
	const char *ro = in_scratch("ro");
	assert_int_equal(mkdir(ro, 0555), 0);
	char ro_dir[PATH_MAX];
	snprintf(ro_dir, sizeof ro_dir, "%s", access(ro, W_OK) != 0 ? ro : "/proc/sys");
	if (access(ro_dir, W_OK) == 0)
		skip();
	const int e = errno;
	char under[PATH_MAX + 32];
	snprintf(under, sizeof under, "%s/ggufs-none/mnt", ro_dir);
	snprintf(line, sizeof line, "%s: the mount point does not exist, and %s cannot be "
	         "written (%s): mount on a folder elsewhere", under, ro_dir, strerror(e));
	expect_refused(under, NULL, false, line);
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_find_escapes),
	cmocka_unit_test(test_find_prefix),
	cmocka_unit_test(test_find_on_path),
	cmocka_unit_test(test_find_passes_over),
	cmocka_unit_test(test_mounted_at),
	cmocka_unit_test(test_check_empty),
	cmocka_unit_test(test_check_not_empty),
	cmocka_unit_test(test_check_file),
	cmocka_unit_test(test_check_missing),
)
