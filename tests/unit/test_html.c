/*
 * common/html.c: a target's string in the page's script data cannot
 * end the <script> element, break out of its literal, or carry a
 * control byte; the flame graph's stacks skip what has nothing to draw.
 */
#include "common/html.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What html_js_string(@s, @max) writes, malloc'ed. */
static char *js(const char *s, size_t max)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	html_js_string(f, s, max);
	cr_assert_eq(fclose(f), 0);
	return buf;
}

Test(html, a_literal_cannot_end_the_script_or_itself)
{
	static const char hostile[] =
		"</script><script>alert(1)</script>\"+x+\"\\\n\r\t\x01\x7f&amp;";
	char *out = js(hostile, 4096);
	size_t i, n = strlen(out);

	cr_assert(out[0] == '"' && out[n - 1] == '"', "%s", out);
	cr_assert_null(strchr(out, '<'), "a '<' in %s", out);
	cr_assert_null(strchr(out, '>'), "a '>' in %s", out);
	cr_assert_null(strchr(out, '&'), "a '&' in %s", out);
	for (i = 1; i + 1 < n; i++) {
		unsigned char c = (unsigned char)out[i];

		cr_assert(c >= 0x20 && c != 0x7f, "byte %#x at %zu of %s", c,
			  i, out);
		/* every quote inside is escaped: the literal ends once */
		if (out[i] == '"') {
			size_t k = i;

			while (k > 1 && out[k - 1] == '\\')
				k--;
			cr_assert((i - k) % 2 == 1, "an unescaped quote at %zu "
				  "of %s", i, out);
		}
	}
	cr_assert(strstr(out, "\\u003c/script\\u003e"), "%s", out);
	cr_assert(strstr(out, "\\\"+x+\\\"\\\\\\u000a"), "%s", out);
	free(out);
}

Test(html, a_literal_is_cut_at_its_bound)
{
	char *out = js("abcdef", 3);

	cr_assert_str_eq(out, "\"abc\"");
	free(out);
}

Test(html, stacks_with_nothing_to_draw_are_left_out)
{
	const uint32_t ids[] = { 0, 1, 2 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int first = 1;

	cr_assert_not_null(f);
	html_flame_stack(f, 0, ids, 3, &first);
	html_flame_stack(f, -5, ids, 3, &first);
	html_flame_stack(f, NAN, ids, 3, &first);
	html_flame_stack(f, INFINITY, ids, 3, &first);
	html_flame_stack(f, 4096, ids, 3, &first);
	html_flame_stack(f, 10, ids, 1, &first);
	cr_assert_eq(fclose(f), 0);
	cr_assert_str_eq(buf, "[4096,0,1,2],\n[10,0]");
	free(buf);
}
