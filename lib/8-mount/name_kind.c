/* What a name names (name_kind.h): the one rule for "is it a library". */
#include "name_kind.h"

#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "errline.h"
#include "libsource_hub.h"
#include "s3.h"
#include "st_model.h"
#include "url.h"

size_t name_kind_scheme_len(const char *name)
{
	size_t n = 0;
	if (!((*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z')))
		return 0;
	while (name[n] && (strchr("+-.", name[n]) || (name[n] >= '0' && name[n] <= '9') ||
	                   (name[n] >= 'a' && name[n] <= 'z') || (name[n] >= 'A' && name[n] <= 'Z')))
		n++;
	return strncmp(name + n, "://", 3) == 0 ? n : 0;
}

/* The kind of an hf:// name: a library when it parses and names one
 * (hub_name_is_library), the tag's model for :QUANT, else one file. */
static enum name_kind hub_kind(const char *name)
{
	struct hub_name n;
	char err[GGUF_ERR_MAX];
	if (!hub_name_parse(name, &n, err))
		return NAME_KIND_HUB_FILE;
	enum name_kind k = n.quant ? NAME_KIND_HUB_QUANT
	                 : hub_name_is_library(&n) ? NAME_KIND_HUB_LIBRARY : NAME_KIND_HUB_FILE;
	hub_name_free(&n);
	return k;
}

/* The kind of an s3:// name: a library when it names no key, or a key ending in '/'
 * (a prefix, as the AWS CLI's `s3 ls` takes it). */
static enum name_kind s3_kind(const char *name)
{
	const char *slash = strchr(name + 5, '/');
	return !slash || !slash[1] || name[strlen(name) - 1] == '/' ? NAME_KIND_S3_LIBRARY
	                                                           : NAME_KIND_S3_OBJECT;
}

enum name_kind name_kind_of(const char *name)
{
	if (s3_is_name(name))
		return s3_kind(name);
	if (strncasecmp(name, "hf://", 5) == 0)
		return hub_kind(name);
	if (url_is_remote(name))
		return NAME_KIND_URL;
	struct stat st;
	int r = stat(name, &st);
	/* a URL of another scheme, unless a local file has that name after all */
	if (name_kind_scheme_len(name) && r != 0 && errno == ENOENT)
		return NAME_KIND_SCHEME;
	if (r != 0 || !S_ISDIR(st.st_mode))
		return NAME_KIND_FILE;
	return st_model_is_folder(name) ? NAME_KIND_MODEL_FOLDER : NAME_KIND_FOLDER;
}

bool name_kind_is_library(enum name_kind kind)
{
	return kind == NAME_KIND_FOLDER || kind == NAME_KIND_HUB_LIBRARY ||
	       kind == NAME_KIND_S3_LIBRARY;
}
