/* GGUF metadata written as the converter's gguf-py GGUFWriter writes it: each key as
 * its length (u64) and bytes, the value's type (u32) and the value, little-endian, into
 * a growable buffer that counts its keys. A safetensors model's metadata is written
 * with these, key by key in the converter's order, then parsed back as any GGUF header
 * (so the rest of ggufs sees a GGUF file). */
#ifndef GGUFS_ST_KV_H
#define GGUFS_ST_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "vbytes.h"

/* Keys being written: their bytes and how many. Zero-initialized is empty; free
 * b.p when done. A failure (out of memory) sticks in b.failed. */
struct st_kv {
	struct vbytes b;
	uint64_t n;
};

/* One key with a value of GGUF's type: u32 (4), f32 (6), bool (7), string (8). */
void st_kv_u32(struct st_kv *kv, const char *key, uint32_t v);
void st_kv_f32(struct st_kv *kv, const char *key, float v);
void st_kv_bool(struct st_kv *kv, const char *key, bool v);
void st_kv_str(struct st_kv *kv, const char *key, const char *v);
/* A string key of len bytes at v (a NUL among them kept). */
void st_kv_strn(struct st_kv *kv, const char *key, const char *v, uint64_t len);

/* An array (9) of n values of element type type (GGUF's number), written after it by
 * the caller with st_kv_put_* (n of them). */
void st_kv_array(struct st_kv *kv, const char *key, uint32_t type, uint64_t n);
/* One element of an array: a string (u64 length, bytes; len bytes of s), a f32, an i32. */
void st_kv_put_str(struct st_kv *kv, const char *s, uint64_t len);
void st_kv_put_f32(struct st_kv *kv, float v);
void st_kv_put_i32(struct st_kv *kv, int32_t v);

#endif
