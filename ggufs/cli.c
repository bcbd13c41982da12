/* The command line: ggufs's own options and operands, taken out before libfuse sees
 * the rest, and --help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggufs.h"

enum { KEY_HELP, KEY_VERSION, KEY_MAX_READ };

static const struct fuse_opt ggufs_opts[] = {
	/* ours, not libfuse's (which dropped it in 3.0): taken out of the -o list */
	{ "nonempty", offsetof(struct options, nonempty), 1 },
	{ "--check", offsetof(struct options, check), 1 },
	{ "--json", offsetof(struct options, json), 1 },
	FUSE_OPT_KEY("max_read=", KEY_MAX_READ),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END,
};

/* Takes MODEL and MOUNTPOINT (and our -h/-V) out of the arguments and leaves the rest,
 * -f -d -s -o ..., for fuse_parse_cmdline and fuse_session_new. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct options *o = data;
	switch (key) {
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_VERSION:
		o->version = 1;
		return 0;
	case KEY_MAX_READ:
		/* kept for libfuse, which checks the number */
		if (sscanf(arg, "max_read=%u", &o->max_read) != 1)
			o->max_read = 0;
		return 1;
	case FUSE_OPT_KEY_NONOPT:
		if (!o->model)
			o->model = arg;
		else if (!o->mountpoint)
			o->mountpoint = arg;
		else
			o->extra++;
		return 0;
	default:
		return 1;
	}
}

/* Ours, then the mount options libfuse knows. */
void cli_usage(const char *prog)
{
	printf("usage: %s [options] MODEL.gguf MOUNTPOINT\n"
	       "       %s --check [--json] MODEL.gguf\n"
	       "\n"
	       "Mounts a GGUF model file read-only: metadata/KEY, tensors/NAME{,.f32,.npy},\n"
	       "stats/NAME, stats.tsv, gguf.json and summary.txt. See ggufs(1).\n"
	       "\n"
	       "options:\n"
	       "    -h   --help            print this help and exit\n"
	       "    -V   --version         print the version and exit\n"
	       "    -f                     stay in the foreground\n"
	       "    -d   -o debug          FUSE debug output (implies -f)\n"
	       "    -s                     single-threaded\n"
	       "    -o nonempty            mount even over a non-empty directory\n"
	       "         --check MODEL     scan every tensor for NaN, inf and bad block\n"
	       "                           scales; mount nothing (exit 0 healthy, 1 not)\n"
	       "         --json            with --check: the report as JSON\n"
	       "    -o opt[,opt...]        mount options, below\n"
	       "\n",
	       prog, prog);
	fflush(stdout);
	fuse_lowlevel_help();
}

int cli_parse(struct fuse_args *args, struct options *o)
{
	return fuse_opt_parse(args, o, ggufs_opts, opt_proc);
}

int insert_escaped_opt(struct fuse_args *args, int pos, const char *name,
                              const char *value)
{
	size_t n = strlen(name), v = strlen(value);
	char *s = malloc(3 + n + 1 + 2 * v + 1);
	if (!s)
		return -1;
	char *p = s + sprintf(s, "-o%s=", name);
	for (const char *q = value; *q; q++) {
		if (*q == ',' || *q == '\\')
			*p++ = '\\';
		*p++ = *q;
	}
	*p = 0;
	int r = fuse_opt_insert_arg(args, pos, s);
	free(s);
	return r;
}
