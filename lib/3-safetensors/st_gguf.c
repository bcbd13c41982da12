/* A folder converted as one GGUF file (st_gguf.h). */
#include "st_gguf.h"

#include <stdlib.h>
#include <string.h>

#include "st_kv.h"
#include "st_meta.h"
#include "st_spm.h"
#include "st_vocab.h"

/* The converter's outtype auto: the first matrix (2 dimensions or more, in its order)
 * that is BF16 or F16 decides; none: F16. */
static void auto_ftype(const struct st_header *const *shards, uint32_t n, enum st_ftype *ft)
{
	for (uint32_t s = 0; s < n; s++)
		for (size_t i = 0; i < shards[s]->n; i++) {
			const struct st_tensor *t = &shards[s]->t[i];
			if (t->n_dims < 2)
				continue;
			if (t->dtype == ST_BF16 || t->dtype == ST_F16) {
				*ft = t->dtype == ST_BF16 ? ST_FTYPE_BF16 : ST_FTYPE_F16;
				return;
			}
		}
	*ft = ST_FTYPE_F16;
}

/* The tokenizer's keys (set_vocab's, for a sentencepiece folder): 0, or -1 with err. */
static int write_tokenizer(const struct st_folder *f, const struct st_config *c,
                           struct st_kv *kv, char err[GGUF_ERR_MAX])
{
	const struct st_special_files sf = { f->config, f->tokenizer_config, f->jinja,
	                                     f->template_json };
	if (st_special_write_prefix(&sf, kv, err) < 0)
		return -1;
	struct st_spm spm;
	if (st_spm_parse((const uint8_t *)f->tokenizer_model.p, f->tokenizer_model.n,
	                 "tokenizer.model", &spm, err) < 0)
		return -1;
	struct st_vocab v;
	int rc = st_vocab_spm(&spm, c->vocab_size, f->added_tokens.p, f->added_tokens.n,
	                      f->tokenizer_config.p, f->tokenizer_config.n, &v, err);
	if (rc == 0) {
		st_vocab_write_spm(&v, kv);
		rc = st_special_write(&sf, v.n, kv, err);
		st_vocab_free(&v);
	}
	st_spm_free(&spm);
	return rc;
}

int st_gguf_make(const struct st_folder *f, const struct st_header *const *shards,
                 uint32_t n, enum st_outtype out, struct st_gguf *g, char err[GGUF_ERR_MAX])
{
	memset(g, 0, sizeof *g);
	if (!f->config.p || !f->tokenizer_model.p) {
		gguf_errf(err, "%s: no %s", f->name, f->config.p ? "tokenizer.model (a "
		          "sentencepiece tokenizer, the one ggufs converts yet)" : "config.json");
		return -1;
	}
	if (st_config_parse(f->config.p, f->config.n, "config.json", &g->config, err) < 0)
		return -1;
	enum st_ftype ftype = out == ST_OUT_F32 ? ST_FTYPE_F32 :
	                      out == ST_OUT_BF16 ? ST_FTYPE_BF16 :
	                      out == ST_OUT_Q8_0 ? ST_FTYPE_Q8_0 : ST_FTYPE_F16;
	if (out == ST_OUT_AUTO)
		auto_ftype(shards, n, &ftype);
	char why[GGUF_ERR_MAX];
	if (st_plan_make(&g->config, shards, n, ftype, &g->plan, why) < 0) {
		gguf_errf(err, "%s: %s", f->name, why);
		goto fail;
	}
	uint64_t params = 0;
	for (size_t i = 0; i < g->plan.n; i++)
		params += g->plan.t[i].src->n_elements;
	struct st_kv kv = { 0 };
	st_kv_str(&kv, "general.architecture", g->config.names->arch);
	st_kv_str(&kv, "general.type", "model");
	if (st_meta_write(f->name, params, &kv, err) < 0)
		goto fail_kv;
	st_config_write_hparams(&g->config, ftype, &kv);
	st_kv_u32(&kv, "general.quantization_version", 2);
	if (write_tokenizer(f, &g->config, &kv, err) < 0)
		goto fail_kv;
	struct vbytes *h = &g->header;
	vbytes_put(h, "GGUF", 4);
	vbytes_le(h, 3, 4);
	vbytes_le(h, g->plan.n, 8);
	vbytes_le(h, kv.n, 8);
	vbytes_put(h, kv.b.p, kv.b.len);
	st_plan_write_infos(&g->plan, h);
	vbytes_resize(h, (h->len + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN);
	if (kv.b.failed || h->failed) {
		gguf_errf(err, "%s: out of memory", f->name);
		goto fail_kv;
	}
	free(kv.b.p);
	g->data_offset = h->len;
	g->size = h->len + g->plan.data_size;
	return 0;
fail_kv:
	free(kv.b.p);
fail:
	st_gguf_free(g);
	return -1;
}

void st_gguf_free(struct st_gguf *g)
{
	st_plan_free(&g->plan);
	st_config_free(&g->config);
	free(g->header.p);
	memset(g, 0, sizeof *g);
}

int st_gguf_read(const struct st_gguf *g, uint64_t off, uint64_t len, void *buf,
                 st_read_fn fn, void *ctx, char why[GGUF_ERR_MAX])
{
	uint8_t *out = buf;
	if (off < g->data_offset) {
		const uint64_t n = len < g->data_offset - off ? len : g->data_offset - off;
		memcpy(out, g->header.p + off, n);
		out += n;
		off += n;
		len -= n;
	}
	if (len == 0)
		return 0;
	return st_plan_read(&g->plan, off - g->data_offset, len, out, fn, ctx, why);
}

static const char *const st_outtype_names[] = {
	[ST_OUT_AUTO] = "auto", [ST_OUT_F32] = "f32", [ST_OUT_F16] = "f16",
	[ST_OUT_BF16] = "bf16", [ST_OUT_Q8_0] = "q8_0",
};

bool st_outtype_parse(const char *name, enum st_outtype *out)
{
	for (size_t i = 0; i < sizeof st_outtype_names / sizeof st_outtype_names[0]; i++)
		if (strcmp(name, st_outtype_names[i]) == 0) {
			*out = (enum st_outtype)i;
			return true;
		}
	return false;
}

const char *st_outtype_name(enum st_outtype out)
{
	return (unsigned)out < sizeof st_outtype_names / sizeof st_outtype_names[0]
	       ? st_outtype_names[out] : "?";
}
