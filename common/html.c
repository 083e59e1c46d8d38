/*
 * The HTML reports' frame: head, style, the flame graph's data and its
 * script (common/html.h).  The script is hand-written, with no library:
 * it builds the tree from the stacks, lays it out once, and draws only
 * the frames wider than half a pixel into a canvas.  bench/report-big-
 * gen.c's 4M dump (10,113 stacks, all distinct, 136,634 frames in the
 * tree) makes a 3.7 MB page (the SVG export: 4.3 MB) whose tree and
 * first drawing take 0.4 s in chromium (data-ms on #flame).  Click a frame to zoom to it, click the top row
 * (or Reset) to zoom out; Search highlights the frames whose name holds
 * the text and says how much of the total they cover.
 */
#include "common/html.h"

#include "common/util.h"

#include <math.h>
#include <string.h>

static const char page_style[] =
	"body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;"
	"max-width:1200px}\n"
	"h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}\n"
	".sub{color:#555}.verdict{font-size:16px;margin:12px 0}\n"
	"table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;"
	"text-align:right;white-space:nowrap}th{border-bottom:1px solid #ccc}"
	"td.name,th.name{text-align:left;white-space:normal;"
	"font-family:monospace;word-break:break-all}\n"
	".warn{color:#b00}svg.spark{vertical-align:middle}"
	"pre{white-space:pre-wrap;font-size:12px}\n"
	"#flame-bar{margin:6px 0}#flame-bar input{width:280px}"
	"#flame canvas{width:100%;display:block;cursor:pointer}\n"
	"#flame-tip{position:fixed;pointer-events:none;background:#fffbe6;"
	"border:1px solid #999;padding:3px 6px;font:12px monospace;"
	"display:none;max-width:600px;word-break:break-all}\n";

/* Before any other script: counts the ones that throw. */
static const char error_hook[] =
	"window.onerror=function(){var e=document.documentElement;"
	"e.dataset.errors=String(1+(+e.dataset.errors||0));};\n";

static const char flame_js[] =
	"(function(){'use strict';\n"
	"var D=window.FLAME,box=document.getElementById('flame'),"
	"t0=performance.now();\n"
	"if(!D||!box)return;\n"
	"var ROW=18,names=D.names;\n"
	"function hb(v){var u=['B','KiB','MiB','GiB','TiB'],i=0,a=Math.abs(v);"
	"if(D.unit!=='bytes')return String(Math.round(v));"
	"while(a>=1024&&i<4){a/=1024;i++;}"
	"return(v<0?'-':'')+(i?a.toFixed(1):a)+' '+u[i];}\n"
	/* the tree: children by id, values summed */
	"var root={id:-1,v:0,k:null,d:0},nodes=0;\n"
	"D.stacks.forEach(function(s){var v=s[0],p=root;if(!(v>0))return;"
	"root.v+=v;for(var i=1;i<s.length;i++){var id=s[i];"
	"if(!p.k)p.k=new Map();var q=p.k.get(id);"
	"if(!q){q={id:id,v:0,k:null,d:p.d+1,up:p};p.k.set(id,q);nodes++;}"
	"q.v+=v;p=q;}});\n"
	"root.up=null;\n"
	/* layout: x in value units, children widest first */
	"var rows=[],depth=0;\n"
	"(function lay(n,x){n.x=x;(rows[n.d]||(rows[n.d]=[])).push(n);"
	"if(n.d>depth)depth=n.d;if(!n.k)return;"
	"var c=Array.from(n.k.values()).sort(function(a,b){return b.v-a.v;});"
	"n.c=c;for(var i=0;i<c.length;i++){lay(c[i],x);x+=c[i].v;}})(root,0);\n"
	"function name(n){return n.id<0?'all':String(names[n.id]);}\n"
	"function color(s){var h=2166136261;for(var i=0;i<s.length;i++)"
	"h=Math.imul(h^s.charCodeAt(i),16777619)>>>0;"
	"return'rgb('+(200+h%56)+','+(80+(h>>>8)%120)+','+(40+(h>>>16)%40)+')';}\n"
	"var bar=document.createElement('div');bar.id='flame-bar';\n"
	"var q=document.createElement('input');q.type='search';"
	"q.placeholder='search frames';\n"
	"var reset=document.createElement('button');reset.textContent='Reset zoom';\n"
	"var info=document.createElement('span');\n"
	"bar.append(q,' ',reset,' ',info);\n"
	"var cv=document.createElement('canvas'),tip=document.createElement('div');"
	"tip.id='flame-tip';\n"
	"box.append(bar,cv,tip);\n"
	"var focus=root,re='',drawn=[];\n"
	"function matches(n){return re&&name(n).toLowerCase().indexOf(re)>=0;}\n"
	"function draw(){var w=box.clientWidth||1000,dpr=window.devicePixelRatio||1,"
	"h=(depth+1)*ROW;cv.width=w*dpr;cv.height=h*dpr;cv.style.height=h+'px';"
	"var g=cv.getContext('2d');g.scale(dpr,dpr);g.font='12px monospace';"
	"g.textBaseline='middle';drawn=[];\n"
	"var x0=focus.x,span=focus.v||1,sc=w/span;\n"
	"for(var d=0;d<=depth;d++){var r=rows[d]||[];for(var i=0;i<r.length;i++){"
	"var n=r[i],x,wd;\n"
	/* the focus' ancestors span the width, dimmed */
	"if(d<focus.d){var a=focus;while(a.d>d)a=a.up;if(a!==n)continue;x=0;wd=w;}\n"
	"else{if(n.x+n.v<=x0||n.x>=x0+span)continue;x=(n.x-x0)*sc;wd=n.v*sc;"
	"if(x<0){wd+=x;x=0;}if(x+wd>w)wd=w-x;}\n"
	"if(wd<0.5)continue;var s=name(n);\n"
	"g.fillStyle=matches(n)?'#e040e0':d<focus.d?'#ddd':color(s);"
	"g.fillRect(x,d*ROW,wd-0.5,ROW-1);\n"
	"if(wd>30){g.fillStyle='#000';var m=Math.floor((wd-6)/7.2);"
	"g.fillText(s.length>m?s.slice(0,Math.max(m-2,0))+'..':s,x+3,d*ROW+ROW/2);}\n"
	"drawn.push([x,d*ROW,wd,n]);}}\n"
	"box.dataset.frames=String(drawn.length);}\n"
	"function at(ev){var b=cv.getBoundingClientRect(),x=ev.clientX-b.left,"
	"y=ev.clientY-b.top;for(var i=0;i<drawn.length;i++){var r=drawn[i];"
	"if(x>=r[0]&&x<r[0]+r[2]&&y>=r[1]&&y<r[1]+ROW)return r[3];}return null;}\n"
	"cv.addEventListener('click',function(ev){var n=at(ev);"
	"focus=!n||n===focus?(focus.up||root):n;draw();});\n"
	"reset.addEventListener('click',function(){focus=root;draw();});\n"
	"cv.addEventListener('mousemove',function(ev){var n=at(ev);"
	"if(!n){tip.style.display='none';return;}"
	"tip.textContent=name(n)+'  '+hb(n.v)+' ('+(100*n.v/(root.v||1)).toFixed(2)+'%)';"
	"tip.style.left=Math.min(ev.clientX+12,window.innerWidth-320)+'px';"
	"tip.style.top=(ev.clientY+14)+'px';tip.style.display='block';});\n"
	"cv.addEventListener('mouseleave',function(){tip.style.display='none';});\n"
	/* matched: the frames matching, not counted again under a match */
	"q.addEventListener('input',function(){re=q.value.toLowerCase();var t=0;"
	"(function sum(n,inm){var m=!inm&&matches(n);if(m)t+=n.v;"
	"(n.c||[]).forEach(function(c){sum(c,inm||m);});})(root,false);"
	"info.textContent=re?'matched '+hb(t)+' ('+(100*t/(root.v||1)).toFixed(1)+"
	"'% of '+hb(root.v)+')':'';draw();});\n"
	/* the top sites by self value, into #flame-top: a wrapper's own
	 * value goes to its first caller that is none */
	"var W=new Set(D.wrap||[]),self=new Map();"
	"(function own(n){var s=n.v;(n.c||[]).forEach("
	"function(c){s-=c.v;own(c);});if(n.id>=0&&s>0){var a=n;"
	"while(W.has(a.id)&&a.up&&a.up.id>=0)a=a.up;"
	"self.set(a.id,(self.get(a.id)||0)+s);}})(root);\n"
	"var top=document.getElementById('flame-top');\n"
	"if(top){Array.from(self.entries()).sort(function(a,b){return b[1]-a[1];})"
	".slice(0,20).forEach(function(e){var tr=document.createElement('tr'),"
	"a=document.createElement('td'),b=document.createElement('td'),"
	"c=document.createElement('td');a.textContent=hb(e[1]);"
	"b.textContent=(100*e[1]/(root.v||1)).toFixed(1)+'%';c.className='name';"
	"c.textContent=String(names[e[0]]);tr.append(a,b,c);top.append(tr);});}\n"
	"box.dataset.total=String(root.v);box.dataset.nodes=String(nodes);\n"
	"if(!root.v){var p=document.createElement('p');"
	"p.textContent='nothing to draw: no stack with a positive value';"
	"box.append(p);}\n"
	"draw();window.addEventListener('resize',draw);\n"
	/* how long the tree and the first drawing took */
	"box.dataset.ms=String(Math.round(performance.now()-t0));\n"
	/* page#selftest: search the first frame of the table, zoom to the
	 * widest frame that has a sibling, zoom out; what each gave, on
	 * #flame */
	"if(location.hash==='#selftest'&&root.c&&root.c.length){"
	"var b=box.dataset,first=top&&top.querySelector('td.name');"
	"b.searchFor=first?first.textContent:name(root.c[0]);"
	"q.value=b.searchFor;q.dispatchEvent(new Event('input'));"
	"b.searchInfo=info.textContent;"
	"var hit=0;(function m(n){if(matches(n))hit++;(n.c||[]).forEach(m);})(root);"
	"b.searchHits=String(hit);q.value='';q.dispatchEvent(new Event('input'));"
	"var z=root;while(z.c&&z.c.length===1)z=z.c[0];"
	"focus=z.c?z.c[0]:z;draw();b.zoomName=name(focus);"
	"b.zoomFrames=String(drawn.length);"
	"b.zoomFull=String(drawn.filter(function(r){return r[3]===focus&&"
	"r[2]>=(box.clientWidth||1000)-1;}).length);"
	"reset.click();b.resetFrames=String(drawn.length);}\n"
	"})();\n";

void html_begin(FILE *f, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\""
	      "default-src 'none'; style-src 'unsafe-inline'; "
	      "script-src 'unsafe-inline'; img-src data:\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width\">\n"
	      "<title>", f);
	xml_text(f, title, 200);
	fprintf(f, "</title>\n<style>%s</style>\n<script>%s</script>\n"
		"</head><body>\n", page_style, error_hook);
}

void html_end(FILE *f)
{
	fprintf(f, "<script>%s</script>\n<script>"
		"document.documentElement.dataset.ready='1';</script>\n"
		"</body></html>\n", flame_js);
}

void html_js_string(FILE *f, const char *s, size_t max)
{
	size_t i;

	fputc('"', f);
	for (i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' ||
			 c == '&')
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void html_flame_section(FILE *f, const char *heading)
{
	fputs("<h2>", f);
	xml_text(f, heading, 200);
	fputs("</h2>\n<p class=\"sub\">Click a frame to zoom in, the top row "
	      "to zoom out; hover for its value.</p>\n<div id=\"flame\"></div>\n"
	      "<h2>Call sites that allocated most</h2>\n<p class=\"sub\">"
	      "The frames that called the allocator, past its wrappers "
	      "(zmalloc, my_malloc, palloc, g_malloc, operator new, ...; "
	      "report --drop-frames names more); the flame graph keeps "
	      "them.</p>\n<table><thead>"
	      "<tr><th>bytes</th><th>share</th><th class=\"name\">site</th>"
	      "</tr></thead><tbody id=\"flame-top\"></tbody></table>\n", f);
}

void html_flame_begin(FILE *f, const char *unit, const char *title)
{
	fputs("<script>window.FLAME={unit:", f);
	html_js_string(f, unit, 32);
	fputs(",title:", f);
	html_js_string(f, title, 400);
	fputs(",wrap:[", f);
}

void html_flame_names(FILE *f)
{
	/* after the wrappers' ids, if any */
	fputs("],names:[", f);
}

void html_flame_stacks(FILE *f)
{
	fputs("],\nstacks:[", f);
}

void html_flame_stack(FILE *f, double value, const uint32_t *ids, size_t n,
		      int *first)
{
	size_t i;

	if (!(value > 0) || !isfinite(value))
		return;
	fprintf(f, "%s[%.0f", *first ? "" : ",\n", value);
	for (i = 0; i < n; i++)
		fprintf(f, ",%u", ids[i]);
	fputc(']', f);
	*first = 0;
}

void html_flame_finish(FILE *f)
{
	fputs("]};</script>\n", f);
}
