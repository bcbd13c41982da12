#include "dequant.h"

const struct dequant_impl dequant_k_impls[] = {
	{ 0, 0, 0, NULL },
};
