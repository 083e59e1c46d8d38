/*
 * exporter/: the exposition written as the format says (HELP and TYPE,
 * escaping, numbers), a hostile process name never ending its quotes
 * or its line, /proc/PID/stat parsed whatever the name holds, the
 * container's id found in the cgroup paths runtimes make, --cgroup's
 * forms, and --textfile's directory rules and atomic replace.
 */
#include "exporter/exporter_internal.h"
#include "exporter/expo.h"
#include "exporter/textfile.h"

#include "../lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the exposition ------------------------------------------------- */

Test(exporter_expo, family_and_samples)
{
	struct expo x, l;

	expo_init(&x);
	expo_init(&l);
	expo_label_u64(&l, "pid", 4242);
	expo_label(&l, "comm", "redis-server");
	expo_family(&x, "memsnap_process_rss_bytes", "gauge",
		    "Resident memory.\nIn bytes, with a \\ in it.");
	expo_sample_u64(&x, "memsnap_process_rss_bytes", expo_text(&l), NULL,
			NULL, 1048576);
	expo_sample(&x, "memsnap_process_rss_bytes", expo_text(&l), "part",
		    "heap", 0.25);
	expo_sample(&x, "memsnap_x", NULL, NULL, NULL, 3.0);
	expo_sample(&x, "memsnap_x", NULL, "reason", "exited", NAN);
	expo_sample(&x, "memsnap_x", "", NULL, NULL, INFINITY);
	expo_sample(&x, "memsnap_x", NULL, NULL, NULL, -INFINITY);
	expo_sample(&x, "memsnap_x", NULL, NULL, NULL, 0.001064);
	expo_sample(&x, "memsnap_x", NULL, NULL, NULL, 1796616582.17);
	cr_assert_eq(x.err, 0);
	cr_assert_str_eq(
		expo_text(&x),
		"# HELP memsnap_process_rss_bytes Resident memory.\\nIn bytes, with a \\\\ in it.\n"
		"# TYPE memsnap_process_rss_bytes gauge\n"
		"memsnap_process_rss_bytes{pid=\"4242\",comm=\"redis-server\"} 1048576\n"
		"memsnap_process_rss_bytes{pid=\"4242\",comm=\"redis-server\",part=\"heap\"} 0.25\n"
		"memsnap_x 3\n"
		"memsnap_x{reason=\"exited\"} NaN\n"
		"memsnap_x +Inf\n"
		"memsnap_x -Inf\n"
		"memsnap_x 0.001064\n"
		"memsnap_x 1796616582.17\n");
	expo_free(&x);
	expo_free(&l);
}

/* The label value of @s, as expo_label() writes it. */
static char *label_of(const char *s)
{
	struct expo l;
	char *v;

	expo_init(&l);
	expo_label(&l, "comm", s);
	cr_assert_eq(l.err, 0);
	v = strdup(expo_text(&l));
	expo_free(&l);
	return v;
}

Test(exporter_expo, hostile_names_stay_inside_their_quotes)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "a\"b", "comm=\"a\\\"b\"" },
		{ "a\\b", "comm=\"a\\\\b\"" },
		{ "x\"} 1\nmemsnap_fake 9", "comm=\"x\\\"} 1?memsnap_fake 9\"" },
		{ "\x1b[31mred", "comm=\"?[31mred\"" },
		{ "del\x7f", "comm=\"del?\"" },
		{ "bad\xff\xfe", "comm=\"bad??\"" },
		{ "c1\xc2\x85", "comm=\"c1?\"" },
		{ "\xc3\xa9t\xc3\xa9", "comm=\"\xc3\xa9t\xc3\xa9\"" },
		{ "over\xc0\xaflong", "comm=\"over??long\"" },
		{ "", "comm=\"\"" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *v = label_of(cases[i].in);

		cr_expect_str_eq(v, cases[i].out, "case %zu", i);
		free(v);
	}
}

Test(exporter_expo, a_long_value_is_cut_on_a_character)
{
	char in[600], *v;
	size_t i, n;

	/* 'a', then two-byte characters: the cut falls inside one */
	in[0] = 'a';
	for (i = 1; i + 2 < sizeof(in); i += 2) {
		in[i] = (char)0xc3;
		in[i + 1] = (char)0xa9;
	}
	in[i] = '\0';
	v = label_of(in);
	n = strlen(v) - strlen("comm=\"\"");
	cr_expect_leq(n, EXPO_LABEL_MAX);
	cr_expect_geq(n, EXPO_LABEL_MAX - 1);
	/* whole characters: the last before the quote ends one */
	cr_expect_eq((unsigned char)v[strlen(v) - 2], 0xa9, "%s", v);
	free(v);
}

/* ---- /proc/PID/stat ------------------------------------------------- */

Test(exporter_pin, stat_fields)
{
	static const char stat[] =
		"4242 (redis-server) S 1 4242 4242 0 -1 4194560 1200 0 0 0 "
		"35 12 0 0 20 0 4 0 312 72318976 2571 18446744073709551615\n";
	struct pin_stat st;

	cr_assert_eq(pin_stat_parse(stat, strlen(stat), &st), 0);
	cr_expect_str_eq(st.comm, "redis-server");
	cr_expect_eq(st.state, 'S');
	cr_expect_not(st.kernel_thread);
	cr_expect_eq(st.threads, 4);
	cr_expect_eq(st.start_time, 312);
	cr_expect_eq(st.rss_pages, 2571);
}

Test(exporter_pin, a_name_with_parentheses_and_spaces)
{
	/* comm is ") S 1 2 (" : the last ')' ends it */
	static const char stat[] =
		"77 () S 1 2 () R 1 77 77 0 -1 2097216 0 0 0 0 0 0 0 0 "
		"-2 -5 1 0 9001 0 0\n";
	struct pin_stat st;

	cr_assert_eq(pin_stat_parse(stat, strlen(stat), &st), 0);
	cr_expect_str_eq(st.comm, ") S 1 2 (");
	cr_expect_eq(st.state, 'R');
	cr_expect(st.kernel_thread, "flags 2097216 hold PF_KTHREAD");
	cr_expect_eq(st.start_time, 9001);
}

Test(exporter_pin, cut_or_garbled_text_is_refused)
{
	static const char *const bad[] = {
		"",
		"4242 (x",
		"4242 (x) S 1 2 3",
		"4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
		"4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 z 20 21",
		"4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 "
		"99999999999999999999999 20 21",
	};
	struct pin_stat st;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(pin_stat_parse(bad[i], strlen(bad[i]), &st),
			     -EINVAL, "case %zu", i);
}

/* ---- labels --------------------------------------------------------- */

#define ID "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"

Test(exporter_labels, container_ids)
{
	static const struct {
		const char *cgroup, *id;
	} cases[] = {
		{ "/system.slice/docker-" ID ".scope", ID },
		{ "/kubepods.slice/kubepods-burstable.slice/"
		  "kubepods-burstable-pod1f0e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/"
		  "cri-containerd-" ID ".scope", ID },
		{ "/kubepods/burstable/pod1f0e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b/" ID,
		  ID },
		{ "/machine.slice/libpod-" ID ".scope/container", ID },
		{ "/docker/" ID, ID },
		{ "/system.slice/redis-server.service", "" },
		{ "/process_api/5b81d1087d7d716327d482958e024ad7", "" },
		/* 65 digits, or capitals: not an id */
		{ "/docker/" ID "0", "" },
		{ "/docker/4F3C2B1A0E9D8C7B6A5F4E3D2C1B0A9F8E7D6C5B4A3F2E1D0C9B8A7F6E5D4C3B",
		  "" },
		{ "", "" },
	};
	char id[80];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		container_id(cases[i].cgroup, id, sizeof(id));
		cr_expect_str_eq(id, cases[i].id, "case %zu", i);
	}
}

Test(exporter_select, cgroup_arguments)
{
	static const struct {
		const char *arg, *path;
	} ok[] = {
		{ "/sys/fs/cgroup/system.slice/redis-server.service",
		  "/system.slice/redis-server.service" },
		{ "system.slice/", "/system.slice" },
		{ "/kubepods.slice", "/kubepods.slice" },
		{ "/", "/" },
		{ "/sys/fs/cgroup", "/" },
	};
	static const char *const bad[] = { "../etc", "/a/../b", "..", "a\nb" };
	char path[256];
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_expect_eq(select_cgroup_arg(ok[i].arg, path, sizeof(path)), 0,
			     "%s", ok[i].arg);
		cr_expect_str_eq(path, ok[i].path);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(select_cgroup_arg(bad[i], path, sizeof(path)),
			     -EINVAL, "%s", bad[i]);
}

/* ---- --textfile ------------------------------------------------------ */

static char dir[256];

static void make_dir(void)
{
	cr_assert_eq(scratch_make("memsnap-test-textfile", dir, sizeof(dir)), 0);
	cr_assert_eq(chmod(dir, 0755), 0);
}

static void remove_dir(void)
{
	scratch_cleanup(dir);
}

static char *slurp(const char *path)
{
	static char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* Entries of @dir other than @keep. */
static size_t others_in(const char *keep)
{
	struct dirent *e;
	size_t n = 0;
	DIR *d = opendir(dir);

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    strcmp(e->d_name, keep))
			n++;
	closedir(d);
	return n;
}

Test(exporter_textfile, written_whole_and_replaced, .init = make_dir,
     .fini = remove_dir)
{
	struct textfile tf;
	char path[512], why[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/memsnap.prom", dir);
	cr_assert_eq(textfile_open(path, &tf, why, sizeof(why)), 0, "%s", why);
	umask(077);
	cr_assert_eq(textfile_write(&tf, "a 1\n", 4), 0);
	cr_expect_str_eq(slurp(path), "a 1\n");
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0644,
		     "the collector's user reads it whatever the umask");
	cr_assert_eq(textfile_write(&tf, "b 2\n", 4), 0);
	cr_expect_str_eq(slurp(path), "b 2\n");
	cr_expect_eq(others_in("memsnap.prom"), 0, "no temporary file left");
	textfile_close(&tf);
}

Test(exporter_textfile, a_planted_symlink_is_replaced_not_followed,
     .init = make_dir, .fini = remove_dir)
{
	struct textfile tf;
	char path[512], victim[512], why[256];
	struct stat st;
	int fd;

	snprintf(victim, sizeof(victim), "%s/victim", dir);
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "keep\n", 5), 5);
	close(fd);
	snprintf(path, sizeof(path), "%s/memsnap.prom", dir);
	cr_assert_eq(symlink(victim, path), 0);
	cr_assert_eq(textfile_open(path, &tf, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(textfile_write(&tf, "a 1\n", 4), 0);
	cr_expect_str_eq(slurp(victim), "keep\n");
	cr_assert_eq(lstat(path, &st), 0);
	cr_expect(S_ISREG(st.st_mode), "the link itself was replaced");
	textfile_close(&tf);
}

Test(exporter_textfile, a_directory_in_the_way_leaves_nothing,
     .init = make_dir, .fini = remove_dir)
{
	struct textfile tf;
	char path[512], why[256];

	snprintf(path, sizeof(path), "%s/memsnap.prom", dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	cr_assert_eq(textfile_open(path, &tf, why, sizeof(why)), 0, "%s", why);
	cr_expect_neq(textfile_write(&tf, "a 1\n", 4), 0);
	cr_expect_eq(others_in("memsnap.prom"), 0, "no temporary file left");
	textfile_close(&tf);
}

Test(exporter_textfile, directories_others_control_are_refused,
     .init = make_dir, .fini = remove_dir)
{
	struct textfile tf;
	char path[512], why[256];

	snprintf(path, sizeof(path), "%s/memsnap.prom", dir);
	cr_assert_eq(chmod(dir, 01777), 0);
	cr_expect_eq(textfile_open(path, &tf, why, sizeof(why)), -EPERM);
	cr_expect(strstr(why, "can be written by others (mode 1777)"), "%s",
		  why);
	cr_assert_eq(chmod(dir, 0775), 0);
	cr_expect_eq(textfile_open(path, &tf, why, sizeof(why)), -EPERM);
	cr_assert_eq(chmod(dir, 0755), 0);
	if (geteuid() == 0) {
		cr_assert_eq(chown(dir, 65534, 65534), 0);
		cr_expect_eq(textfile_open(path, &tf, why, sizeof(why)), -EPERM);
		cr_expect(strstr(why, "belongs to uid 65534"), "%s", why);
		cr_assert_eq(chown(dir, 0, 0), 0);
	}
	cr_expect_eq(textfile_open(path, &tf, why, sizeof(why)), 0, "%s", why);
	textfile_close(&tf);
}

Test(exporter_textfile, names_the_collector_would_skip_are_refused)
{
	static const char *const bad[] = { "/tmp/memsnap.txt", "/tmp/.prom",
					   "/tmp/memsnap.prom.tmp", "/tmp/" };
	struct textfile tf;
	char why[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(textfile_open(bad[i], &tf, why, sizeof(why)),
			     -EINVAL, "%s", bad[i]);
		cr_expect(strstr(why, "node_exporter reads only *.prom"), "%s",
			  why);
	}
}
