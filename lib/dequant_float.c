#include "dequant.h"

const struct dequant_impl dequant_float_impls[] = {
	{ 0, 0, 0, NULL },
};
