/* The part files of a folder (st_parts.h). */
#include "st_parts.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void st_parts_sort(char **names, size_t n)
{
	if (n > 1)
		qsort(names, n, sizeof *names, by_name);
}

void st_parts_free(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

int st_parts_is_part(const char *name)
{
	const size_t n = strlen(name);
	return n >= 5 + 12 && strncmp(name, "model", 5) == 0 &&
	       strcmp(name + n - 12, ".safetensors") == 0;
}

/* Whether s names a file in the folder itself. */
static int plain_name(const char *s)
{
	return *s && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 && !strchr(s, '/');
}

int st_parts_from_index(const char *json, size_t len, char ***names, size_t *n,
                        char ***tensors, size_t *n_tensors, char err[GGUF_ERR_MAX])
{
	*names = NULL;
	*n = 0;
	if (tensors) {
		*tensors = NULL;
		*n_tensors = 0;
	}
	json_error_t je;
	json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
	const json_t *map = json_object_get(j, "weight_map");
	int rc = -1;
	if (!j) {
		gguf_errf(err, "model.safetensors.index.json: not JSON: %.200s", je.text);
		return -1;
	}
	if (!json_is_object(map)) {
		gguf_errf(err, "model.safetensors.index.json: no weight_map object");
		goto out;
	}
	const size_t total = json_object_size(map);
	char **all = calloc(total ? total : 1, sizeof *all);
	char **tn = tensors ? calloc(total ? total : 1, sizeof *tn) : NULL;
	if (!all || (tensors && !tn)) {
		free(all);
		free(tn);
		gguf_errf(err, "model.safetensors.index.json: out of memory");
		goto out;
	}
	size_t k = 0;
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)map, key, v) {
		const char *file = json_string_value(v);
		if (!file || !plain_name(file)) {
			gguf_errf(err, "model.safetensors.index.json: tensor '%.64s' is in no file "
			          "of the folder", key);
			goto fail;
		}
		all[k] = strdup(file);
		if (tn)
			tn[k] = strdup(key);
		if (!all[k] || (tn && !tn[k])) {
			gguf_errf(err, "model.safetensors.index.json: out of memory");
			k++;
			goto fail;
		}
		k++;
	}
	/* the files, each once */
	st_parts_sort(all, k);
	size_t u = 0;
	for (size_t i = 0; i < k; i++) {
		if (u > 0 && strcmp(all[u - 1], all[i]) == 0) {
			free(all[i]);
			continue;
		}
		all[u++] = all[i];
	}
	if (u > ST_MAX_PARTS) {
		gguf_errf(err, "model.safetensors.index.json: %zu files, more than the %u ggufs "
		          "reads", u, ST_MAX_PARTS);
		st_parts_free(all, u);
		st_parts_free(tn, k);
		goto out;
	}
	if (tn)
		st_parts_sort(tn, k);
	*names = all;
	*n = u;
	if (tensors) {
		*tensors = tn;
		*n_tensors = k;
	}
	rc = 0;
	goto out;
fail:
	st_parts_free(all, k);
	st_parts_free(tn, k);
out:
	json_decref(j);
	return rc;
}
