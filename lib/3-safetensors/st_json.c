/* Python's view of JSON values (st_json.h). */
#include "st_json.h"

bool st_json_truthy(const json_t *j)
{
	if (!j)
		return false;
	switch (json_typeof(j)) {
	case JSON_TRUE:
		return true;
	case JSON_INTEGER:
	case JSON_REAL:
		return json_number_value(j) != 0;
	case JSON_STRING:
		return json_string_length(j) > 0;
	case JSON_ARRAY:
		return json_array_size(j) > 0;
	case JSON_OBJECT:
		return json_object_size(j) > 0;
	default:
		return false;
	}
}
