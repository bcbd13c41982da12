/* What 3-safetensors' readers of JSON share: Python's view of a value json.load made. */
#ifndef GGUFS_ST_JSON_H
#define GGUFS_ST_JSON_H

#include <jansson.h>
#include <stdbool.h>

/* Whether j is true as Python's bool() takes the value json.load made of it (NULL,
 * a missing value, is false). */
bool st_json_truthy(const json_t *j);

#endif
