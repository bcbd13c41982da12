/* The command line: every option ggufs accepts is one entry of cli_options, which
 * checks the arguments before anything is touched, takes ggufs's own options out before
 * libfuse sees the rest, and writes --help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggufs_config.h"
#include "ggufs.h"
#include "log_escape.h"
#include "size_arg.h"

/* Who reads an option: ggufs alone (taken out of the arguments), libfuse alone (left in
 * them), or both (read by ggufs and left in). */
enum opt_use { USE_GGUFS, USE_FUSE, USE_BOTH };

struct cli_option {
	/* "-f", "--help": a command-line switch; anything else is an -o option, in
	 * fuse_opt's template form: "nonempty" (a flag), "max_read=%u" (a number),
	 * "fsname=%s" or "context=" (any text) */
	const char *templ;
	const char *alias;     /* a second spelling of a switch ("-h" for "--help"), or NULL */
	enum opt_use use;
	size_t offset;         /* where ggufs keeps it in struct cli_opts (USE_GGUFS/BOTH):
	                        * an int for a flag, unsigned for %u, char * for %s (which
	                        * fuse_opt_parse allocates) */
	const char *arg;       /* the value's name in --help: "N", "NAME", ... */
	const char *help;      /* its line in --help; NULL: listed on the "also accepted"
	                        * lines (options that mount(8) passes, which change nothing
	                        * that ggufs cares about or that ggufs overrides) */
	bool alone;            /* asks for nothing else: no operands needed (--help) */
	bool with_check;       /* an -o option that --check and --diff take too (how to
	                        * fetch) */
};

#define OURS(field) .use = USE_GGUFS, .offset = offsetof(struct cli_opts, field)
#define FUSE .use = USE_FUSE

/* Everything that is accepted, in --help order. An -o option that libfuse does not know
 * must be USE_GGUFS, or fuse_session_new refuses it. */
static const struct cli_option cli_options[] = {
	{ "--help", "-h", OURS(help), .help = "print this help and exit", .alone = true },
	{ "--version", "-V", OURS(version), .alone = true,
	  .help = "print the versions of ggufs and libfuse and exit" },
	{ "-f", FUSE, .help = "stay in the foreground" },
	{ "-d", FUSE, .help = "FUSE debug output, every request (implies -f)" },
	{ "-s", FUSE, .help = "serve requests in a single thread" },
	/* ggufs --check [--json] MODEL.gguf...: no mount point, no other option */
	{ "--check", OURS(check), .help = "scan MODEL.gguf for broken tensors; mount nothing" },
	/* ggufs --diff [--json] A B: two models, no mount point, no other option */
	{ "--diff", OURS(diff), .help = "compare B with A tensor by tensor; mount nothing" },
	{ "--json", OURS(json), .help = "with --check or --diff: the report as JSON" },
	/* -o options of ggufs */
	{ "nonempty", OURS(nonempty),
	  .help = "mount over a non-empty directory or a mount" },
	/* -o options of ggufs for remote models (ignored for a local file) */
	{ "token_file=%s", .with_check = true, OURS(token_file), .arg = "PATH",
	  .help = "remote: bearer token from PATH (else $HF_TOKEN)" },
	{ "cafile=%s", .with_check = true, OURS(cafile), .arg = "PATH",
	  .help = "remote: trust the CA certificates in PATH too" },
	{ "cache_size=%s", .with_check = true, OURS(cache_size_arg), .arg = "SIZE",
	  .help = "remote: memory cache, bytes or K/M/G/T (256M)" },
	{ "cache_dir=%s", .with_check = true, OURS(cache_dir), .arg = "DIR",
	  .help = "remote bytes, quants/ on disk (~/.cache/ggufs)" },
	{ "cache_max=%s", .with_check = true, OURS(cache_max_arg), .arg = "SIZE",
	  .help = "remote: bound of cache_dir (min(10G, free/4))" },
	{ "timeout=%u", .with_check = true, OURS(timeout), .arg = "SECONDS",
	  .help = "remote: abandon a request under 4K/s this long (30)" },
	{ "s3_anonymous", .with_check = true, OURS(s3_anonymous),
	  .help = "s3://: no credentials, requests unsigned (public)" },
	{ "s3_virtual_host", .with_check = true, OURS(s3_virtual_host),
	  .help = "s3://: BUCKET.ENDPOINT, not ENDPOINT/BUCKET" },
	{ "log=%s", OURS(log_file), .arg = "FILE",
	  .help = "log events to FILE (else syslog; -f: stderr)" },
	{ "edits=%s", OURS(edits_file), .arg = "FILE",
	  .help = "metadata/ writable by you; edits kept in FILE" },
	{ "requantize", OURS(requantize),
	  .help = "quants/ of quantized models (--allow-requantize)" },
	{ "outtype=%s", .with_check = true, OURS(outtype), .arg = "TYPE",
	  .help = "MODEL_FOLDER's tensors: " OUTTYPES },
	{ "imatrix=%s", OURS(imatrix_file), .arg = "FILE",
	  .help = "quants/ under this importance matrix (--imatrix)" },
	{ "recipes=%s", OURS(recipes_file), .arg = "FILE",
	  .help = "quants/ also FILE's NAME BASE [OPTIONS] lines" },
	{ "quant_threads=%u", OURS(quant_threads), .arg = "N",
	  .help = "quants/: at most N threads quantize ahead (cores)" },
	{ "passthrough=%s", OURS(passthrough_arg), .arg = "yes|no",
	  .help = "model.gguf read by the kernel from the file (yes)" },
	/* -o options of libfuse that matter here */
	{ "allow_other", .use = USE_BOTH, .offset = offsetof(struct cli_opts, allow_other),
	  .help = "let every user read the mount" },
	{ "allow_root", FUSE, .help = "let root read it too" },
	{ "auto_unmount", FUSE, .help = "unmount when ggufs exits, even if killed" },
	{ "max_read=%u", .use = USE_BOTH, .offset = offsetof(struct cli_opts, max_read),
	  .arg = "N", .help = "at most N bytes per read request" },
	{ "max_threads=%u", FUSE, .arg = "N", .help = "at most N threads serving requests (default 10)" },
	{ "max_idle_threads=%u", FUSE, .arg = "N",
	  .help = "at most N idle threads kept (default: no limit)" },
	{ "clone_fd", FUSE, .help = "one /dev/fuse descriptor per thread" },
	{ "debug", FUSE, .help = "the same as -d" },
	{ "fsname=%s", FUSE, .arg = "NAME",
	  .help = "the source mount and df show (default: model path)" },
	{ "subtype=%s", FUSE, .arg = "TYPE", .help = "the type becomes fuse.TYPE (default: ggufs)" },
	{ "default_permissions", FUSE, .help = "the kernel checks the modes (always on)" },
	/* what mount(8) and mount.fuse3 pass; ro,nosuid,nodev are always added last */
	{ "ro", FUSE }, { "rw", FUSE }, { "suid", FUSE }, { "nosuid", FUSE },
	{ "dev", FUSE }, { "nodev", FUSE }, { "exec", FUSE }, { "noexec", FUSE },
	{ "async", FUSE }, { "sync", FUSE }, { "dirsync", FUSE }, { "atime", FUSE },
	{ "noatime", FUSE }, { "user=%s", FUSE, .arg = "NAME" },
	{ "context=%s", FUSE, .arg = "CONTEXT" }, { "fscontext=%s", FUSE, .arg = "CONTEXT" },
	{ "defcontext=%s", FUSE, .arg = "CONTEXT" }, { "rootcontext=%s", FUSE, .arg = "CONTEXT" },
};
#define N_OPTIONS (sizeof cli_options / sizeof cli_options[0])

/* The tail of every argument error: where to look. */
#define SEE_HELP "(ggufs --help lists them)"
#define USAGE "(usage: ggufs [options] MODEL.gguf MOUNTPOINT; ggufs --help for more)"
#define USAGE_CHECK "(usage: ggufs --check [--json] MODEL.gguf|URL...; ggufs --help for more)"
#define USAGE_DIFF "(usage: ggufs --diff [--json] A.gguf|URL B.gguf|URL; ggufs --help for more)"

static bool is_switch(const struct cli_option *c)
{
	return c->templ[0] == '-';
}

/* Length of the option's name: "max_read" of "max_read=%u". */
static size_t name_len(const char *templ)
{
	return strcspn(templ, "=");
}

/* True when the -o option c takes a value (its template has "="). */
static bool takes_value(const struct cli_option *c)
{
	return c->templ[name_len(c->templ)] == '=';
}

/* The -o option that the item (name or name=value) names, or NULL. */
static const struct cli_option *find_opt(const char *item, size_t len)
{
	size_t n = 0;
	while (n < len && item[n] != '=')
		n++;
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct cli_option *c = &cli_options[i];
		if (!is_switch(c) && name_len(c->templ) == n && strncmp(c->templ, item, n) == 0)
			return c;
	}
	return NULL;
}

/* The switch spelled arg ("-f", "--help", "-h"), or NULL. */
static const struct cli_option *find_switch(const char *arg)
{
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct cli_option *c = &cli_options[i];
		if (is_switch(c) && (strcmp(c->templ, arg) == 0 || (c->alias && strcmp(c->alias, arg) == 0)))
			return c;
	}
	return NULL;
}

/* The one rule for a zero: every option that takes a number or a size names an amount
 * of something (seconds, bytes, threads), and none has a meaning for 0 that its default
 * does not give better, so 0 is refused (exit 2) rather than read as "the default" or
 * "unlimited" by some options and not others. Says so for item[0..len); returns false. */
static bool zero_refused(const char *item, size_t len)
{
	log_errf("option '-o %.*s': 0 is not allowed, the least is 1 (leave the "
	        "option out for its default) " SEE_HELP, (int)len, item);
	return false;
}

/* Checks one item of an -o list, item[0..len) (escapes left in: option names have
 * none). True, or false after one line on stderr naming it. *found gets its option. */
static bool check_item(const char *item, size_t len, const struct cli_option **found)
{
	const struct cli_option *c = find_opt(item, len);
	*found = c;
	const char *eq = memchr(item, '=', len);
	int n = (int)len;
	if (!c) {
		log_errf("unknown option '-o %.*s' " SEE_HELP, n, item);
		return false;
	}
	if (!takes_value(c) && eq) {
		log_errf("option '-o %.*s' takes no value " SEE_HELP, n, item);
		return false;
	}
	if (takes_value(c) && !eq) {
		log_errf("option '-o %.*s' needs a value: %.*s=%s " SEE_HELP, n,
		        item, n, item, c->arg);
		return false;
	}
	if (eq && c->arg && strcmp(c->arg, "SIZE") == 0) {
		char value[32];
		size_t vlen = (size_t)(item + len - eq - 1);
		uint64_t size = 0;
		bool ok = vlen < sizeof value;
		if (ok) {
			memcpy(value, eq + 1, vlen);
			value[vlen] = 0;
			ok = size_arg_parse(value, &size);
		}
		if (ok && !size)
			return zero_refused(item, len);
		if (!ok) {
			log_errf("option '-o %.*s' needs a size: bytes, or a number with K,"
			        " M, G or T " SEE_HELP, n, item);
			return false;
		}
	}
	if (eq && strcmp(c->templ, "outtype=%s") == 0) {
		char value[16];
		size_t vlen = (size_t)(item + len - eq - 1);
		bool ok = vlen < sizeof value;
		if (ok) {
			memcpy(value, eq + 1, vlen);
			value[vlen] = 0;
			ok = open_name_outtype_ok(value);
		}
		if (!ok) {
			log_errf("option '-o %.*s' takes " OUTTYPES " " SEE_HELP, n, item);
			return false;
		}
	}
	if (eq && c->arg && strcmp(c->arg, "yes|no") == 0) {
		size_t vlen = (size_t)(item + len - eq - 1);
		if (!((vlen == 3 && memcmp(eq + 1, "yes", 3) == 0) ||
		      (vlen == 2 && memcmp(eq + 1, "no", 2) == 0))) {
			log_errf("option '-o %.*s' takes yes or no " SEE_HELP, n, item);
			return false;
		}
	}
	if (eq && strstr(c->templ, "%u")) {
		const char *v = eq + 1, *end = item + len;
		bool digits = v < end && end - v <= 9;   /* fits an unsigned */
		for (const char *p = v; p < end; p++)
			digits = digits && *p >= '0' && *p <= '9';
		if (!digits) {
			log_errf("option '-o %.*s' needs a number below 10^9 " SEE_HELP, n, item);
			return false;
		}
		if (strspn(v, "0") >= (size_t)(end - v))
			return zero_refused(item, len);
	}
	return true;
}

/* Checks an -o list as fuse_opt_parse will split it: at commas, "\," and "\\" being
 * escaped characters. An empty item (",,"), which libfuse refuses, is named too.
 * *mount_only gets the first item that only a mount takes (a static copy), if none
 * came before. */
static bool check_opt_list(const char *list, const char **mount_only)
{
	static char first[64];
	const char *start = list, *p = list;
	for (;;) {
		if (*p == '\\' && p[1]) {
			p += 2;
			continue;
		}
		if (*p == ',' || !*p) {
			if (p == start) {
				log_errf("empty option in '-o %s' " SEE_HELP, list);
				return false;
			}
			const struct cli_option *c;
			if (!check_item(start, (size_t)(p - start), &c))
				return false;
			if (!c->with_check && !*mount_only) {
				snprintf(first, sizeof first, "-o %.*s", (int)name_len(c->templ), c->templ);
				*mount_only = first;
			}
			if (!*p)
				return true;
			start = p + 1;
		}
		p++;
	}
}

/* The arguments of --check: one operand or more, each MODEL.gguf or a URL, none empty,
 * and no option that only a mount takes (the remote ones, which say how to fetch, are
 * welcome). True, or false after one line on stderr naming the bad argument. */
static bool check_operands(int n_operands, int n_empty, const char *mount_opt)
{
	if (mount_opt) {
		log_errf("option '%s' does not go with --check " USAGE_CHECK, mount_opt);
		return false;
	}
	if (n_operands == 0 || n_empty) {
		log_errf("%s MODEL.gguf " USAGE_CHECK, n_operands ? "empty" : "missing");
		return false;
	}
	return true;
}

/* The arguments of --diff: exactly two operands, the models A and B, and no option that
 * only a mount takes. True, or false after one line on stderr naming the bad argument. */
static bool diff_operands(const char *const operand[3], int n_operands, const char *mount_opt)
{
	if (mount_opt) {
		log_errf("option '%s' does not go with --diff " USAGE_DIFF, mount_opt);
		return false;
	}
	if (n_operands > 2) {
		log_errf("unexpected argument '%s' after A and B " USAGE_DIFF, operand[2]);
		return false;
	}
	for (int k = 0; k < n_operands; k++) {
		if (!*operand[k]) {
			log_errf("empty %s argument '' " USAGE_DIFF, k ? "B" : "A");
			return false;
		}
	}
	if (n_operands < 2) {
		log_errf("missing %s " USAGE_DIFF, n_operands ? "B" : "A and B");
		return false;
	}
	return true;
}

bool cli_check(int argc, char **argv)
{
	const char *operand[3] = { NULL, NULL, NULL };   /* the third: the first extra one */
	int n_operands = 0, n_all = 0, n_empty = 0;   /* (all of them, for --check) */
	bool info = false, options_done = false, check = false, diff = false, json = false;
	const char *mount_opt = NULL;   /* the first option that only a mount takes */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (options_done || a[0] != '-') {
			if (n_operands < 3)
				operand[n_operands++] = a;
			n_all++;
			n_empty += !*a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			options_done = true;
		} else if (strncmp(a, "-o", 2) == 0) {
			const char *list = a[2] ? a + 2 : argv[++i];
			if (!list || !*list) {
				log_errf("option '-o' needs a list of options " SEE_HELP);
				return false;
			}
			if (!check_opt_list(list, &mount_opt))
				return false;
		} else {
			const struct cli_option *c = find_switch(a);
			if (!c) {
				log_errf("unknown option '%s' " SEE_HELP, a);
				return false;
			}
			info = info || c->alone;
			check = check || c->offset == offsetof(struct cli_opts, check);
			diff = diff || c->offset == offsetof(struct cli_opts, diff);
			json = json || c->offset == offsetof(struct cli_opts, json);
			if (c->use == USE_FUSE && !mount_opt)
				mount_opt = c->templ;
		}
	}
	if (info)
		return true;
	if (check && diff) {
		log_errf("options '--check' and '--diff' do not go together " SEE_HELP);
		return false;
	}
	if (json && !check && !diff) {
		log_errf("option '--json' goes with --check or --diff " SEE_HELP);
		return false;
	}
	if (diff)
		return diff_operands(operand, n_operands, mount_opt);
	if (check)
		return check_operands(n_all, n_empty, mount_opt);
	if (n_operands > 2) {
		log_errf("unexpected argument '%s' after MODEL.gguf and MOUNTPOINT "
		        USAGE, operand[2]);
		return false;
	}
	for (int k = 0; k < n_operands; k++) {
		if (!*operand[k]) {
			log_errf("empty %s argument '' " USAGE,
			        k ? "MOUNTPOINT" : "MODEL.gguf");
			return false;
		}
	}
	if (n_operands < 2) {
		log_errf("missing %s " USAGE,
		        n_operands ? "MOUNTPOINT" : "MODEL.gguf and MOUNTPOINT");
		return false;
	}
	return true;
}

/* Takes MODEL and MOUNTPOINT out of the arguments (ggufs's own options go by their
 * templates) and leaves the rest, -f -d -s -o ..., for fuse_parse_cmdline and
 * fuse_session_new. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct cli_opts *o = data;
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	if (!o->model)
		o->model = arg;
	else if (!o->mountpoint)
		o->mountpoint = arg;
	o->operands[o->n_operands++] = arg;   /* check_args counted them: room for all */
	return 0;
}

/* One line of --help: the option, padded, then what it does. */
static void usage_line(const struct cli_option *c)
{
	char left[64];
	int n = (int)name_len(c->templ);
	if (c->alias)
		snprintf(left, sizeof left, "%s, %.*s", c->alias, n, c->templ);
	else if (is_switch(c))
		snprintf(left, sizeof left, "%.*s", n, c->templ);
	else
		snprintf(left, sizeof left, "-o %.*s%s%s", n, c->templ, takes_value(c) ? "=" : "",
		         takes_value(c) ? c->arg : "");
	printf("    %-24s %s\n", left, c->help);
}

/* The options without a line of their own, several to a line. */
static void usage_also_accepted(void)
{
	printf("    also accepted, as mount(8) passes them (ggufs adds ro,nosuid,nodev):\n"
	       "     ");
	int col = 5;
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct cli_option *c = &cli_options[i];
		if (is_switch(c) || c->help)
			continue;
		int n = (int)name_len(c->templ);
		int w = 1 + n + (takes_value(c) ? 1 + (int)strlen(c->arg) : 0);
		if (col + w > 79) {
			printf("\n     ");
			col = 5;
		}
		printf(" %.*s%s%s", n, c->templ, takes_value(c) ? "=" : "", takes_value(c) ? c->arg : "");
		col += w;
	}
	printf("\n");
}

void cli_usage(const char *prog)
{
	const char *slash = strrchr(prog, '/');
	printf("usage: %s [options] MODEL.gguf MOUNTPOINT\n"
	       "       %s [options] http[s]://HOST/PATH/MODEL.gguf MOUNTPOINT\n"
	       "       %s [options] hf://OWNER/REPO[@REVISION]/PATH/MODEL.gguf MOUNTPOINT\n"
	       "       %s [options] s3://BUCKET/KEY.gguf|s3://BUCKET[/PREFIX/] MOUNTPOINT\n"
	       "       %s [options] FOLDER|hf://OWNER/REPO[@REVISION][/FOLDER] MOUNTPOINT\n"
	       "       %s [options] MODEL_FOLDER MOUNTPOINT\n"
	       "       %s --check [--json] [-o REMOTE_OPTIONS] MODEL.gguf|URL...\n"
	       "       %s --diff [--json] [-o REMOTE_OPTIONS] A.gguf|URL B.gguf|URL\n"
	       "\n"
	       "Mounts a GGUF model file read-only: metadata/KEY, tensors/NAME{,.f32,.npy},\n"
	       "stats/NAME, stats.tsv, gguf.json and summary.txt; fusermount3 -u MOUNTPOINT\n"
	       "unmounts it. A FOLDER or a hub repository mounts as a library: a directory per\n"
	       "model, models.tsv. A MODEL_FOLDER (config.json, *.safetensors, tokenizer.model)\n"
	       "mounts as the GGUF file convert_hf_to_gguf.py would make of it.\n"
	       "--check scans the model for NaN, inf and bad block scales instead;\n"
	       "--diff prints the error of every tensor of B against A (rmse, rel_rmse,\n"
	       "max_abs_err, cosine), what does not pair, and a line for the whole model.\n"
	       "The manual: man ggufs (installed as " GGUFS_MAN_PATH "),\n"
	       "or man -l man/ggufs.1 in the source tree.\n"
	       "\n"
	       "options:\n",
	       slash ? slash + 1 : prog, slash ? slash + 1 : prog, slash ? slash + 1 : prog,
	       slash ? slash + 1 : prog, slash ? slash + 1 : prog, slash ? slash + 1 : prog,
	       slash ? slash + 1 : prog, slash ? slash + 1 : prog);
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (is_switch(&cli_options[i]))
			usage_line(&cli_options[i]);
	printf("    %-24s %s\n", "-o OPT[,OPT...]", "mount options, any of:");
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (!is_switch(&cli_options[i]) && cli_options[i].help)
			usage_line(&cli_options[i]);
	usage_also_accepted();
}

bool cli_parse(struct fuse_args *args, struct cli_opts *o)
{
	/* fuse_opt templates of ggufs's options: stored, and taken out unless libfuse
	 * reads them too */
	o->operands = calloc((size_t)args->argc + 1, sizeof *o->operands);
	if (!o->operands) {
		log_errf("out of memory");
		return false;
	}
	struct fuse_opt templ[3 * N_OPTIONS + 1];   /* an option, its alias, its keep */
	size_t n = 0;
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct cli_option *c = &cli_options[i];
		if (c->use == USE_FUSE)
			continue;
		templ[n++] = (struct fuse_opt){ c->templ, (unsigned long)c->offset, 1 };
		if (c->alias)
			templ[n++] = (struct fuse_opt){ c->alias, (unsigned long)c->offset, 1 };
		if (c->use == USE_BOTH)
			templ[n++] = (struct fuse_opt)FUSE_OPT_KEY(c->templ, FUSE_OPT_KEY_KEEP);
	}
	templ[n] = (struct fuse_opt)FUSE_OPT_END;
	if (fuse_opt_parse(args, o, templ, opt_proc) != 0)
		return false;
	/* checked by cli_check, so it parses */
	if (o->cache_size_arg && !size_arg_parse(o->cache_size_arg, &o->cache_size))
		return false;
	if (o->cache_max_arg && !size_arg_parse(o->cache_max_arg, &o->cache_max))
		return false;
	if (o->diff) {   /* the second operand is the model B, not a mount point */
		o->model_b = o->mountpoint;
		o->mountpoint = NULL;
	}
	return true;
}

void cli_free(struct cli_opts *o)
{
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct cli_option *c = &cli_options[i];
		size_t n = strlen(c->templ);
		if (c->use != USE_FUSE && n > 3 && strcmp(c->templ + n - 3, "=%s") == 0) {
			const char **value = (const char **)(void *)((char *)o + c->offset);
			free((char *)*value);
			*value = NULL;
		}
	}
	free(o->operands);
	o->operands = NULL;
}

int cli_insert_escaped_opt(struct fuse_args *args, int pos, const char *name,
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

/* open_name_opts.note and .waiting: one line on stderr. */
static void cli_say_line(void *arg, const char *line)
{
	(void)arg;
	log_errf("%s", line);
}

/* getenv as open_name_opts.env reads the environment. */
static const char *cli_getenv(const char *name)
{
	return getenv(name);
}

struct open_name_opts cli_open_opts(const struct cli_opts *o)
{
	return (struct open_name_opts){
		.token_file = o->token_file, .cafile = o->cafile, .cache_size = o->cache_size,
		.cache_dir = o->cache_dir, .cache_max = o->cache_max, .timeout = o->timeout,
		.s3_anonymous = o->s3_anonymous, .s3_virtual_host = o->s3_virtual_host,
		.outtype = o->outtype, .stream_ok = o->check, .env = cli_getenv, .note = cli_say_line,
		.waiting = isatty(STDERR_FILENO) ? cli_say_line : NULL,
	};
}
