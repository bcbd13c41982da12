#include "dequant.h"

const struct dequant_impl dequant_legacy_impls[] = {
	{ 0, 0, 0, NULL },
};
