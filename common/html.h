#ifndef MEMSNAP_COMMON_HTML_H
#define MEMSNAP_COMMON_HTML_H

#include <stdint.h>
#include <stdio.h>

/*
 * The HTML reports (`report DUMP --format html`, `report DIR --format
 * html`): one file that opens offline in any browser.  Everything is in
 * it: the style, the charts (SVG written here), and one script that
 * draws the flame graph.  Its Content-Security-Policy forbids the page
 * any request at all, and the target's strings reach it only escaped:
 * as text (xml_text()) or as JavaScript string literals
 * (html_js_string()) that the script puts in the page with textContent,
 * never as markup.
 *
 * The page says how it went on its <html> element, for a browser test:
 * data-ready="1" once every script ran, data-errors="N" when N threw.
 * Opened as page.html#selftest, the flame graph searches for its top
 * frame, zooms in and out by itself and says what each gave in data-*
 * attributes of #flame.
 */

/* The document up to <body>, @title escaped. */
void html_begin(FILE *f, const char *title);

/* The flame graph's data and script, then </body></html>. */
void html_end(FILE *f);

/* @s as a JavaScript string literal, quotes included, safe inside a
 * <script> element (no "<", ">" or "&" in it), cut at @max bytes. */
void html_js_string(FILE *f, const char *s, size_t max);

/*
 * The flame graph's data, between html_begin() and html_end():
 *
 *   html_flame_begin(f, "bytes", "title") ... the ids of the names
 *                 that are allocator wrappers', "," between, if any
 *   html_flame_names(f) ... html_js_string(f, name, ...) and ","
 *   html_flame_stacks(f) ... html_flame_stack(f, value, ids, n)
 *   html_flame_finish(f)
 *
 * A stack is its value and its frames' ids (into the names), root
 * first.  The page draws it into <div id="flame">, which
 * html_flame_section() writes, whole stacks; its table of the sites
 * that allocated most gives a frame's own value to the first caller
 * that is not among the wrappers (profile/wrappers.h), which may be
 * none.
 */
void html_flame_section(FILE *f, const char *heading);
void html_flame_begin(FILE *f, const char *unit, const char *title);
void html_flame_names(FILE *f);
void html_flame_stacks(FILE *f);
void html_flame_stack(FILE *f, double value, const uint32_t *ids, size_t n,
		      int *first);
void html_flame_finish(FILE *f);

#endif
