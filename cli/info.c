/*
 * memsnap --pid N info: what the process is and which allocators it
 * holds, from /proc and the mapped ELF files, and then each allocator's
 * runtime state (version, profiling settings, statistics), read through
 * ONE borrowed thread.  With --no-attach, or when the attach is refused,
 * the static part alone (with a warning): the target is then never
 * stopped.
 */
#include "cli/cli.h"

#include "allocators/allocator.h"
#include "cli/sampling.h"
#include "cli/session.h"

#include "proc/procinfo.h"
#include "common/json.h"
#include "common/util.h"
#include "symbols/detect.h"
#include "proc/maps.h"
#include "symbols/objects.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const source_names[] = {
	[SYMSRC_DYNSYM] = ".dynsym",
	[SYMSRC_SYMTAB] = ".symtab",
	[SYMSRC_DEBUGDATA] = ".gnu_debugdata",
};

static const char *build_id_hex(const struct object *obj, char *buf)
{
	const unsigned char *id;
	size_t len;

	if (!obj->elf || elfobj_build_id(obj->elf, &id, &len))
		return NULL;
	hex_encode(id, len, buf);
	return buf;
}

/* What `info` learned by attaching: one state per allocator of d->v. */
struct runtime {
	struct alloc_state *st; /* [d->n]; st[i].n == 0: not read */
	pid_t tid;		/* the borrowed thread, 0: no attach */
	char error[600];	/* why not, when an attach was tried */
	bool timed_out;		/* a call is still running in the target */
	bool have_sampler;	/* memsnap's sampler is loaded: */
	struct sampler_status sampler;
};

static void print_item_text(FILE *out, const struct alloc_item *it, int width)
{
	char hb[32];

	fprintf(out, "  %-*s  ", width, it->key);
	if (it->err) {
		/* The allocator's own "no" (ENOENT: profiling off, compiled
		 * out), or a value that could not be read from the target. */
		if (it->err > 0)
			fprintf(out, "n/a (%s)\n", strerrorname_np(it->err) ?: "?");
		else
			fprintf(out, "unreadable (%s)\n", strerror(-it->err));
		return;
	}
	switch (it->type) {
	case ALLOC_ITEM_BOOL:
		fprintf(out, "%s\n", it->b ? "true" : "false");
		break;
	case ALLOC_ITEM_U64:
		fprintf(out, "%" PRIu64 "\n", it->u);
		break;
	case ALLOC_ITEM_BYTES:
		human_bytes(it->u, hb, sizeof(hb));
		fprintf(out, "%s (%" PRIu64 ")\n", hb, it->u);
		break;
	case ALLOC_ITEM_STR:
		fprintf(out, "\"%s\"\n", it->s);
		break;
	}
}

static void print_runtime_text(FILE *out, const struct allocator *a,
			       const struct alloc_state *st,
			       const struct runtime *rt)
{
	int width = 0;
	size_t i;

	if (!st || !st->n)
		return;
	for (i = 0; i < st->n; i++)
		if ((int)strlen(st->v[i].key) > width)
			width = (int)strlen(st->v[i].key);
	fprintf(out, "  runtime (read through tid %d)\n", (int)rt->tid);
	(void)a;
	for (i = 0; i < st->n; i++)
		print_item_text(out, &st->v[i], width);
}

static void print_runtime_json(struct json *j, const struct alloc_state *st,
			       const struct runtime *rt)
{
	size_t i;

	if (!st || !st->n) {
		json_null(j, "runtime");
		json_string(j, "runtime_error",
			    rt->error[0] ? rt->error : NULL);
		return;
	}
	json_object_begin(j, "runtime");
	json_u64(j, "tid", (uint64_t)rt->tid);
	for (i = 0; i < st->n; i++) {
		const struct alloc_item *it = &st->v[i];

		if (it->err) {
			json_null(j, it->key);
			continue;
		}
		switch (it->type) {
		case ALLOC_ITEM_BOOL:
			json_bool(j, it->key, it->b);
			break;
		case ALLOC_ITEM_U64:
		case ALLOC_ITEM_BYTES:
			json_u64(j, it->key, it->u);
			break;
		case ALLOC_ITEM_STR:
			json_string(j, it->key, it->s);
			break;
		}
	}
	json_object_end(j);
	json_null(j, "runtime_error");
}

static void print_text(FILE *out, const struct procinfo *pi,
		       const struct detection *d, const struct runtime *rt)
{
	const struct allocator *srv = detection_serving(d);
	char rss[32], vsz[32], bid[2 * 64 + 1], can[64];
	size_t i, j;

	human_bytes(pi->rss_bytes, rss, sizeof(rss));
	human_bytes(pi->vsz_bytes, vsz, sizeof(vsz));
	fprintf(out, "pid       %d (%s)\n", (int)pi->pid, pi->comm);
	fprintf(out, "exe       %s%s\n", pi->exe[0] ? pi->exe : "?",
	       pi->exe_deleted ? " (deleted)" : "");
	fprintf(out, "threads   %lu\n", pi->threads);
	fprintf(out, "rss       %s\n", rss);
	fprintf(out, "vsz       %s\n", vsz);
	if (pi->tracer)
		fprintf(out, "traced    by pid %d (%s)\n", (int)pi->tracer,
		       pi->tracer_comm);
	if (d->have_malloc)
		fprintf(out, "malloc    %s, 0x%" PRIx64 " in %s\n",
		       srv		  ? alloc_kind_title(srv->kind)
		       : d->malloc_musl ? "musl malloc (no control functions)"
					: "unknown allocator",
		       d->malloc_sym.addr, d->malloc_sym.obj->path);
	else if (d->malloc_unknown)
		fprintf(out, "malloc    unknown: %s, searched first, is unreadable (%s)\n",
		       d->malloc_unknown->path,
		       strerror(-d->malloc_unknown->err));
	else
		fprintf(out, "malloc    not found\n");
	if (rt->have_sampler)
		sampler_info_text(out, &rt->sampler);

	for (i = 0; i < d->n; i++) {
		const struct allocator *a = &d->v[i];
		const struct object *obj = a->obj;
		size_t width = 0;

		fprintf(out, "\n%s%s\n", alloc_kind_title(a->kind),
		       a->serves_malloc ? "  [serves malloc]" : "");
		fprintf(out, "  object    %s%s\n", obj->path,
		       obj->deleted ? " (deleted)" : "");
		fprintf(out, "  build-id  %s\n", build_id_hex(obj, bid) ?: "none");
		alloc_caps_text(alloc_caps_now(a->kind, rt->st ? &rt->st[i]
							       : NULL) &
					~ALLOC_CAN_STATE,
				can, sizeof(can));
		fprintf(out, "  can       %s\n", can);
		if (a->kind == ALLOC_JEMALLOC)
			fprintf(out, "  prefix    %s\n",
			       a->prefix[0] ? a->prefix : "none");
		for (j = 0; j < a->nfuncs; j++) {
			size_t w = strlen(a->prefix) + strlen(a->funcs[j].role);

			if (w > width)
				width = w;
		}
		for (j = 0; j < a->nfuncs; j++) {
			const struct alloc_func *f = &a->funcs[j];
			int pad = (int)(width - strlen(a->prefix) -
					strlen(f->role));

			if (f->found)
				fprintf(out, "  %s%s%*s  0x%" PRIx64 "  %s\n",
				       a->prefix, f->role, pad, "", f->addr,
				       source_names[f->source]);
			else
				fprintf(out, "  %s%s%*s  missing\n", a->prefix,
				       f->role, pad, "");
		}
		print_runtime_text(out, a, rt->st ? &rt->st[i] : NULL, rt);
	}
}

/* "can": ["dump", "prof", "stats", "trim"]: the commands memsnap has for
 * this allocator, as far as its state shows. */
static void print_caps_json(struct json *j, unsigned int caps)
{
	static const struct {
		unsigned int cap;
		const char *name;
	} names[] = {
		{ ALLOC_CAN_DUMP, "dump" },
		{ ALLOC_CAN_PROF, "prof" },
		{ ALLOC_CAN_STATS, "stats" },
		{ ALLOC_CAN_TRIM, "trim" },
	};
	size_t i;

	json_array_begin(j, "can");
	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (caps & names[i].cap)
			json_string(j, NULL, names[i].name);
	json_array_end(j);
}

static void print_json(const struct procinfo *pi, const struct detection *d,
		       const struct runtime *rt)
{
	const struct allocator *srv = detection_serving(d);
	char bid[2 * 64 + 1];
	struct json j;
	size_t i, k;

	json_init(&j, stdout);
	json_object_begin(&j, NULL);
	json_u64(&j, "pid", (uint64_t)pi->pid);
	json_string(&j, "comm", pi->comm);
	json_string(&j, "exe", pi->exe[0] ? pi->exe : NULL);
	json_bool(&j, "exe_deleted", pi->exe_deleted);
	json_u64(&j, "threads", pi->threads);
	json_u64(&j, "rss_bytes", pi->rss_bytes);
	json_u64(&j, "vsz_bytes", pi->vsz_bytes);
	json_u64(&j, "uid", pi->euid);
	if (pi->tracer)
		json_u64(&j, "tracer_pid", (uint64_t)pi->tracer);
	else
		json_null(&j, "tracer_pid");

	if (d->have_malloc) {
		json_object_begin(&j, "malloc");
		json_hex(&j, "address", d->malloc_sym.addr);
		json_string(&j, "object", d->malloc_sym.obj->path);
		json_string(&j, "allocator",
			    srv ? alloc_kind_name(srv->kind) : NULL);
		json_object_end(&j);
	} else {
		json_null(&j, "malloc");
	}
	if (rt->have_sampler)
		sampler_info_json(&j, &rt->sampler);
	else
		json_null(&j, "sampler");

	json_array_begin(&j, "allocators");
	for (i = 0; i < d->n; i++) {
		const struct allocator *a = &d->v[i];

		json_object_begin(&j, NULL);
		json_string(&j, "kind", alloc_kind_name(a->kind));
		json_string(&j, "prefix", a->prefix);
		json_bool(&j, "serves_malloc", a->serves_malloc);
		print_caps_json(&j, alloc_caps_now(a->kind, rt->st ? &rt->st[i]
								 : NULL));
		json_object_begin(&j, "object");
		json_string(&j, "path", a->obj->path);
		json_bool(&j, "deleted", a->obj->deleted);
		json_string(&j, "build_id", build_id_hex(a->obj, bid));
		json_hex(&j, "load_bias", a->obj->bias);
		json_string(&j, "opened_via", a->obj->via);
		json_object_end(&j);
		json_object_begin(&j, "functions");
		for (k = 0; k < a->nfuncs; k++) {
			const struct alloc_func *f = &a->funcs[k];

			if (!f->found) {
				json_null(&j, f->role);
				continue;
			}
			json_object_begin(&j, f->role);
			{
				char sym[ALLOC_MAX_PREFIX + 64];

				snprintf(sym, sizeof(sym), "%s%s", a->prefix,
					 f->role);
				json_string(&j, "symbol", sym);
			}
			json_hex(&j, "address", f->addr);
			json_string(&j, "table", source_names[f->source]);
			json_object_end(&j);
		}
		json_object_end(&j);
		print_runtime_json(&j, rt->st ? &rt->st[i] : NULL, rt);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_object_end(&j);
	json_finish(&j);
}

/* One line: what the process has instead of an allocator we know. */
static void explain_none(const struct procinfo *pi, const struct detection *d)
{
	if (d->have_malloc && d->malloc_musl)
		error("pid %d: musl malloc: no control functions (no statistics, trim or heap profile; `memsnap call` works)",
		      (int)pi->pid);
	else if (d->have_malloc)
		error("pid %d: no allocator control functions found (malloc is %s in %s; no jemalloc, glibc, tcmalloc or mimalloc symbols%s)",
		      (int)pi->pid,
		      d->malloc_sym.name ? d->malloc_sym.name : "?",
		      d->malloc_sym.obj->path,
		      d->unreadable ? "; some objects unreadable" : "");
	else if (d->malloc_unknown)
		error("pid %d: no allocator control functions found (%zu objects unreadable, among them %s: %s)",
		      (int)pi->pid, d->unreadable, d->malloc_unknown->path,
		      strerror(-d->malloc_unknown->err));
	else
		error("pid %d: no allocator control functions found (no malloc symbol in %zu objects%s: static and stripped, or not C)",
		      (int)pi->pid, d->order.n,
		      d->unreadable ? ", some unreadable" : "");
}

/*
 * The text holds the target's own strings (its name, paths, jemalloc's
 * opt.prof_prefix): made in memory, then written line by line through
 * fputs_clean(), so none of them can drive the reader's terminal.
 */
static void print_text_clean(const struct procinfo *pi,
			     const struct detection *d,
			     const struct runtime *rt)
{
	char *buf = NULL, *line, *nl;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);

	if (!mem) {
		print_text(stdout, pi, d, rt);
		return;
	}
	print_text(mem, pi, d, rt);
	fclose(mem);
	for (line = buf; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		fputs_clean(line, stdout);
		putchar('\n');
	}
	free(buf);
}

/*
 * Read the state of every allocator that can report it, all through one
 * borrowed thread.  A refusal is a warning: the static part stands.
 */
/* The failure @rc in one line, for info's runtime section. */
static void describe(const struct target *t, int rc, char *buf, size_t size)
{
	struct diag d;

	target_diag(t, rc, &d);
	snprintf(buf, size, "%.*s", (int)(size - 1), d.what);
}

static void read_runtime(const struct options *opt, struct target *t,
			 struct runtime *rt)
{
	const struct detection *d = &t->det;
	size_t i, able = 0;
	int rc = 0;

	for (i = 0; i < d->n; i++)
		if (alloc_caps(d->v[i].kind) & ALLOC_CAN_STATE)
			able++;
	if (!able)
		return;
	rt->st = calloc(d->n, sizeof(*rt->st));
	if (!rt->st)
		return;
	/* The shared attach path, on the view info has loaded. */
	rc = target_open_session(opt, t);
	if (rc) {
		describe(t, rc, rt->error, sizeof(rt->error));
		goto out;
	}
	rt->tid = t->tid;
	for (i = 0; i < d->n && !rc; i++) {
		if (!(alloc_caps(d->v[i].kind) & ALLOC_CAN_STATE))
			continue;
		rc = alloc_state(t->s, &d->v[i], &rt->st[i]);
		if (rc) {
			describe(t, rc, rt->error, sizeof(rt->error));
			rt->timed_out = rc == -ETIMEDOUT;
			rt->st[i].n = 0;
		}
	}
	rc = target_detach(opt, "info", t);
	if (rc && !rt->error[0])
		snprintf(rt->error, sizeof(rt->error),
			 "the borrowed thread was not restored cleanly");
out:
	if (rt->error[0])
		warning(opt, "info %d: runtime state not read: %s",
			(int)t->pi.pid, rt->error);
}

int cmd_info(const struct options *opt, int argc, char **argv)
{
	struct runtime rt = { 0 };
	bool attach = !opt->no_attach;
	struct target t;
	int rc, ret, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-attach")) {
			attach = false;
			continue;
		}
		return fail(DIAG_USAGE, "info: unexpected argument '%s' (see memsnap --help)",
			    argv[i]);
	}
	rc = target_view(opt, "info", &t);
	if (rc) {
		target_free(&t);
		return rc;
	}
	if (t.det.unreadable)
		warning(opt, "pid %d: %zu mapped objects could not be read",
			(int)t.pi.pid, t.det.unreadable);
	/* Read from its memory: nothing is stopped, --no-attach too. */
	rt.have_sampler = !t.sampler_rc;
	rt.sampler = t.sampler;
	if (rt.have_sampler)
		(void)sampler_resident(t.pi.pid, &rt.sampler);
	if (attach)
		read_runtime(opt, &t, &rt);
	if (opt->json)
		print_json(&t.pi, &t.det, &rt);
	else
		print_text_clean(&t.pi, &t.det, &rt);
	free(rt.st);
	/* A call left running in the target is not a mere warning: the
	 * static part is printed, and the exit code says it. */
	ret = rt.timed_out ? EXIT_TIMEOUT : EXIT_OK;
	if (!t.det.n) {
		fflush(stdout);
		explain_none(&t.pi, &t.det);
		ret = diag_exit(DIAG_UNSUPPORTED);
	}
	target_free(&t);
	return ret;
}
