#include "token.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "url.h"

char *token_read_file(const char *path, char err[GGUF_ERR_MAX])
{
	FILE *f = fopen(path, "re");
	if (!f) {
		gguf_errf(err, "%s: cannot read the token file: %s", path, strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 044)) {
		gguf_errf(err, "%s: the token file is readable by group or others (mode %04o): "
		          "chmod go-rw it", path, (unsigned)(st.st_mode & 07777));
		fclose(f);
		return NULL;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, f);
	fclose(f);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = 0;
	if (n <= 0) {
		gguf_errf(err, "%s: the token file is empty", path);
		free(line);
		return NULL;
	}
	if (memchr(line, 0, (size_t)n)) {
		gguf_errf(err, "%s: the token file holds a NUL byte", path);
		explicit_bzero(line, (size_t)n);
		free(line);
		return NULL;
	}
	return line;
}

int token_choose(const char *url, bool hf, const char *endpoint, const char *token_file,
                 const char *hf_token, struct remote_opts *ro, char **token,
                 char err[GGUF_ERR_MAX])
{
	*token = NULL;
	ro->hub = hf || url_same_origin(url, endpoint && *endpoint ? endpoint : HF_ENDPOINT_DEFAULT);
	if (token_file) {
		*token = token_read_file(token_file, err);
		return *token ? 0 : -1;
	}
	if (!hf_token || !*hf_token)
		return 0;
	if (!ro->hub) {
		ro->token_withheld = true;
		return 0;
	}
	ro->token_from_env = true;
	*token = strdup(hf_token);
	if (!*token) {
		gguf_errf(err, "out of memory");
		return -1;
	}
	return 0;
}

bool token_ok(const char *token)
{
	for (const unsigned char *p = (const unsigned char *)token; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return false;
	return *token != 0;
}

void token_free(char *token)
{
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
}
