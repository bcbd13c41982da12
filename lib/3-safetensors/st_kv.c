/* GGUF keys written as gguf-py writes them (st_kv.h). */
#include "st_kv.h"

#include <string.h>

/* The key's name and its value's type: the start of every key. */
static void key_head(struct st_kv *kv, const char *key, uint32_t type)
{
	st_kv_put_str(kv, key, strlen(key));
	vbytes_le(&kv->b, type, 4);
	kv->n++;
}

void st_kv_u32(struct st_kv *kv, const char *key, uint32_t v)
{
	key_head(kv, key, 4);
	vbytes_le(&kv->b, v, 4);
}

void st_kv_f32(struct st_kv *kv, const char *key, float v)
{
	key_head(kv, key, 6);
	st_kv_put_f32(kv, v);
}

void st_kv_bool(struct st_kv *kv, const char *key, bool v)
{
	key_head(kv, key, 7);
	vbytes_le(&kv->b, v ? 1 : 0, 1);
}

void st_kv_str(struct st_kv *kv, const char *key, const char *v)
{
	key_head(kv, key, 8);
	st_kv_put_str(kv, v, strlen(v));
}

void st_kv_strn(struct st_kv *kv, const char *key, const char *v, uint64_t len)
{
	key_head(kv, key, 8);
	st_kv_put_str(kv, v, len);
}

void st_kv_array(struct st_kv *kv, const char *key, uint32_t type, uint64_t n)
{
	key_head(kv, key, 9);
	vbytes_le(&kv->b, type, 4);
	vbytes_le(&kv->b, n, 8);
}

void st_kv_put_str(struct st_kv *kv, const char *s, uint64_t len)
{
	vbytes_le(&kv->b, len, 8);
	vbytes_put(&kv->b, s, len);
}

void st_kv_put_f32(struct st_kv *kv, float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	vbytes_le(&kv->b, u, 4);
}

void st_kv_put_i32(struct st_kv *kv, int32_t v)
{
	vbytes_le(&kv->b, (uint32_t)v, 4);
}
