#include "dequant.h"

const struct dequant_impl dequant_misc_impls[] = {
	{ 0, 0, 0, NULL },
};
