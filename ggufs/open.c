/* The command line's options as lib/8-mount's (open_name.h), and where its lines go: a
 * note on stderr, what a remote open waits for on a terminal only. Shared by a mount,
 * --check and --diff, so that all three open names alike. */
#include <stdlib.h>
#include <unistd.h>

#include "ggufs.h"
#include "open.h"
#include "model.h"
#include "log_escape.h"

/* open_name_opts.note and .waiting: one line on stderr. */
static void print_line(void *arg, const char *line)
{
	(void)arg;
	log_errf("%s", line);
}

/* getenv as open_name_opts.env reads the environment. */
static const char *env_get(const char *name)
{
	return getenv(name);
}

struct open_name_opts open_opts(const struct options *o)
{
	return (struct open_name_opts){
		.token_file = o->token_file, .cafile = o->cafile, .cache_size = o->cache_size,
		.cache_dir = o->cache_dir, .cache_max = o->cache_max, .timeout = o->timeout,
		.s3_anonymous = o->s3_anonymous, .s3_virtual_host = o->s3_virtual_host,
		.stream_ok = o->check, .env = env_get, .note = print_line,
		.waiting = isatty(STDERR_FILENO) ? print_line : NULL,
	};
}

struct ggufs_model *open_model(const struct options *o, char **shown)
{
	char err[GGUF_ERR_MAX];
	const struct open_name_opts oo = open_opts(o);
	struct ggufs_model *m = open_name_model(o->model, &oo, shown, err);
	if (!m)
		log_errf("%s", err);
	return m;
}
