/* softdat-trace --html: a self-contained HTML page holding an SVG
 * sequence diagram of one run (merge.h). No network: inline CSS and JS.
 *
 * Lanes, left to right: consumer A, RNIC A, wire, RNIC B, consumer B (one
 * trace: consumer, RNIC, wire). One row per record shown, in (aligned)
 * time order. Posts are arrows consumer -> RNIC, events RNIC -> consumer,
 * frames RNIC -> RNIC across the wire (from the sender's row to the
 * receiver's), memory checks boxes on the target's RNIC, placements marks
 * under the check that allowed them (RDMA Write) or the frame that carried
 * the data (Sends, Read Responses). Errors are red. Every element
 * carries its record: hover shows it, click prints it in the side panel.
 *
 * The SVG is well-formed XML with classes and data-* attributes a test
 * (or a script) can query: class "frame" (data-op, data-stag, data-to,
 * data-dir), "memcheck allowed|denied", "placement", "post", "event"
 * (data-type, data-status), "call", "state"; data-side "A" or "B". */
#include "tools/softdat-trace/merge.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/softdat-trace/jsonl.h"

#define ROW 24
#define TOP 70
#define W1 1560
#define W2 1100

enum col { C_CONS_A, C_RNIC_A, C_WIRE, C_RNIC_B, C_CONS_B };
static const int col_x[] = {270, 530, 760, 990, 1250};
static const int col_x1[] = {270, 580, 860}; /* one lane: consumer, RNIC, wire */

static int g_nlanes;

static int x_of(int lane, bool rnic)
{
    if (g_nlanes == 1)
        return rnic ? col_x1[1] : col_x1[0];
    if (lane == 0)
        return rnic ? col_x[C_RNIC_A] : col_x[C_CONS_A];
    return rnic ? col_x[C_RNIC_B] : col_x[C_CONS_B];
}
static int wire_x(void)
{
    return g_nlanes == 1 ? col_x1[2] : col_x[C_WIRE];
}

/* Text for XML (element content and attribute values). */
static void esc(FILE *o, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        default:
            if ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f)
                fputc(*s, o);
            else
                fputc('?', o);
        }
    }
}

static const char *get(const struct rec *r, const char *k)
{
    const char *v = rec_get(r, k);
    return v && strcmp(v, "null") != 0 ? v : NULL;
}
static const char *get0(const struct rec *r, const char *k)
{
    const char *v = get(r, k);
    return v ? v : "";
}

/* An element's opening: group with class, record index, side; then its
 * data- attributes (attr), then close_open_g adds the tooltip. */
static void open_g(FILE *o, const char *cls, size_t i, int lane)
{
    fprintf(o, "<g class=\"%s\" data-i=\"%zu\" data-side=\"%c\"", cls, i, lane == 0 ? 'A' : 'B');
}
static void attr(FILE *o, const char *name, const char *val)
{
    fprintf(o, " data-%s=\"", name);
    esc(o, val);
    fputc('"', o);
}
static void close_open_g(FILE *o, const char *line)
{
    fputs("><title>", o);
    esc(o, line);
    fputs("</title>", o);
}

static void text(FILE *o, int x, int y, const char *anchor, const char *cls, const char *s)
{
    fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"%s\" class=\"%s\">", x, y, anchor, cls);
    esc(o, s);
    fputs("</text>", o);
}

static void arrow(FILE *o, int x1, int y1, int x2, int y2, const char *cls)
{
    fprintf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"%s\" marker-end=\"url(#ah)\"/>", x1, y1, x2, y2,
            cls);
}

static bool event_is_error(const struct rec *r)
{
    const char *st = get(r, "status"), *ty = get0(r, "type");
    if (st && strcmp(st, "SUCCESS") != 0)
        return true;
    return strstr(ty, "BROKEN") || strstr(ty, "REJECTED") || strstr(ty, "TIMED_OUT") || strstr(ty, "UNREACHABLE") ||
           strstr(ty, "ERROR") || strncmp(ty, "ASYNC", 5) == 0;
}

/* The frame's label: "rdma_write stag=0x.. to=0x.. len=1024". */
static void frame_label(const struct rec *r, char *b, size_t cap)
{
    const char *kind = get0(r, "kind");
    if (strcmp(kind, "fpdu") != 0 && strcmp(kind, "datagram") != 0) {
        snprintf(b, cap, "MPA %s%s pdata=%s", strcmp(kind, "mpa_req") == 0 ? "Request" : "Reply",
                 get(r, "reject") && strcmp(get(r, "reject"), "true") == 0 ? " REJECT" : "", get0(r, "pdata_len"));
        return;
    }
    const char *op = get0(r, "op");
    int n = snprintf(b, cap, "%s", op);
    if (get(r, "stag"))
        n += snprintf(b + n, cap - (size_t)n, " stag=%s to=%s", get0(r, "stag"), get0(r, "to"));
    else if (get(r, "msn"))
        n += snprintf(b + n, cap - (size_t)n, " qn=%s msn=%s", get0(r, "queue"), get0(r, "msn"));
    if (get(r, "src_stag") && strcmp(get0(r, "size"), "0") != 0)
        n += snprintf(b + n, cap - (size_t)n, " src=%s+%s size=%s", get0(r, "src_stag"), get0(r, "src_to"),
                      get0(r, "size"));
    if (get(r, "term_text"))
        n += snprintf(b + n, cap - (size_t)n, " [%s]", get0(r, "term_text"));
    else
        snprintf(b + n, cap - (size_t)n, " len=%s", get0(r, "payload_len"));
}

/* Is a placement drawn in the row after this record? Data is placed
 * after the target's memory table allowed it (RDMA Write: under the
 * check), or, where the trace shows no check (Sends into a posted
 * receive, Read Responses at the requester), under the frame. */
static bool placement_after(const struct rec *r)
{
    const char *k = get0(r, "rec");
    if (strcmp(k, "memcheck") == 0)
        return strcmp(get0(r, "allowed"), "true") == 0 && strcmp(get0(r, "access"), "write") == 0 &&
               rec_u64(r, "len") > 0;
    return strcmp(k, "frame") == 0 && strcmp(get0(r, "dir"), "rx") == 0 && rec_u64(r, "payload_len") > 0 &&
           strcmp(get0(r, "op"), "rdma_write") != 0;
}

static void draw_placement(FILE *o, const struct rec *r, size_t i, int lane, int rx, bool right, int y,
                           const char *line)
{
    char lab[300];
    bool check = strcmp(get0(r, "rec"), "memcheck") == 0;
    const char *op = check ? "rdma_write" : get0(r, "op");
    const char *len = check ? get0(r, "len") : get0(r, "payload_len");
    if (get(r, "stag"))
        snprintf(lab, sizeof lab, "placed %s B at stag %s + to %s", len, get0(r, "stag"), get0(r, "to"));
    else
        snprintf(lab, sizeof lab, "placed %s B (%s) into the posted receive", len, op);
    open_g(o, "placement", i, lane);
    attr(o, "op", op);
    attr(o, "stag", get0(r, "stag"));
    close_open_g(o, line);
    int w = 290, x0 = right ? rx - 10 : rx - w + 10;
    fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"3\" class=\"pl\"/>", x0, y - 8, w, 15);
    text(o, x0 + w / 2, y + 4, "middle", "", lab);
    fputs("</g>\n", o);
}

static void css_js_head(FILE *o, const char *title)
{
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", o);
    esc(o, title);
    fputs("</title>\n<style>\n"
          "body{font:13px sans-serif;margin:0;display:flex;background:#fff;color:#222}\n"
          "#d{flex:1;overflow:auto}#p{width:360px;border-left:1px solid #ccc;padding:8px;position:sticky;top:0;"
          "height:100vh;overflow:auto;background:#fafafa}\n"
          "#p pre{white-space:pre-wrap;word-break:break-all;font:12px monospace}\n"
          "svg text{font:11px monospace}svg .hd{font:bold 13px sans-serif}\n"
          ".life{stroke:#bbb;stroke-dasharray:4 3}.wire{stroke:#888;stroke-width:6;opacity:.15}\n"
          "line.post{stroke:#1f5fbf;stroke-width:1.5}line.ev{stroke:#2a8a2a;stroke-width:1.5}\n"
          "line.fr{stroke:#444;stroke-width:1.6}line.fr.term,line.ev.err{stroke:#d01c1c;stroke-width:2.2}\n"
          "text.err{fill:#d01c1c;font-weight:bold}text.ok{fill:#2a8a2a}text.dim{fill:#888}text.post{fill:#1f5fbf}\n"
          "rect.ok{fill:#e3f6e3;stroke:#2a8a2a}rect.err{fill:#fde3e3;stroke:#d01c1c}rect.pl{fill:#fff3c4;stroke:#b58b00}\n"
          "g[data-i]{cursor:pointer}g[data-i]:hover text{text-decoration:underline}g.sel line,g.sel rect{stroke-width:3}\n"
          "#k{font-size:12px;margin:6px 0}#k span{margin-right:10px}\n"
          "</style></head><body>\n",
          o);
}

int render_html(FILE *o, const struct entry *e, size_t n, int nlanes, char labels[][64], const int *pids,
                const int64_t *offset_ns)
{
    g_nlanes = nlanes;
    int width = nlanes == 1 ? W2 : W1;
    /* inverse of seq (peer links) */
    size_t *pos = malloc((n ? n : 1) * sizeof *pos);
    int *row = malloc((n ? n : 1) * sizeof *row);
    if (pos == NULL || row == NULL) {
        free(pos);
        free(row);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        pos[e[i].seq] = i;
    /* Rows: which records are shown. */
    static struct rec r;
    int rows = 0;
    for (size_t i = 0; i < n; i++) {
        row[i] = -1;
        const char *err;
        if (!rec_parse(e[i].line, &r, &err))
            continue;
        const char *k = get0(&r, "rec");
        bool ok = get(&r, "rc") == NULL || strcmp(get0(&r, "rc"), "DAT_SUCCESS") == 0;
        if (strcmp(k, "trace") == 0)
            continue;
        if (strcmp(k, "call") == 0 && ok && rec_quiet_call(get0(&r, "fn")))
            continue;
        if (strcmp(k, "log") == 0 && strcmp(get0(&r, "level"), "error") != 0 && strcmp(get0(&r, "level"), "warn") != 0)
            continue;
        row[i] = rows++;
        if (placement_after(&r))
            rows++;
    }
    int height = TOP + (rows + 2) * ROW;

    char title[200];
    snprintf(title, sizeof title, "softdat sequence: %s%s%s", labels[0], nlanes > 1 ? " / " : "",
             nlanes > 1 ? labels[1] : "");
    css_js_head(o, title);
    fputs("<div id=\"d\"><div style=\"padding:6px 10px\"><b>", o);
    esc(o, title);
    fputs("</b><div id=\"k\"><span style=\"color:#1f5fbf\">&#8594; post</span><span style=\"color:#2a8a2a\">&#8592; "
          "event / allowed check</span><span>&#8600; frame on the wire</span><span style=\"color:#b58b00\">&#9632; "
          "placement</span><span style=\"color:#d01c1c\">red: error</span> &#8212; hover or click any element</div>",
          o);
    if (nlanes > 1)
        fprintf(o, "<div class=\"dim\">clock offset of %s against %s: %+.1f &#181;s (from matched frames)</div>",
                labels[1], labels[0], (double)offset_ns[1] / 1000.0);
    fputs("</div>\n", o);
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"seq\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            width, height, width, height);
    fputs("<defs><marker id=\"ah\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
          "orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\" fill=\"context-stroke\"/></marker></defs>\n",
          o);
    fprintf(o, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", width, height);
    /* Lanes and their heads. */
    struct {
        int x;
        char name[96];
    } heads[5];
    int nh = 0;
    for (int l = 0; l < nlanes && l < 2; l++) {
        heads[nh].x = x_of(l, false);
        snprintf(heads[nh++].name, sizeof heads[0].name, "consumer %c: %s (pid %d)", 'A' + l, labels[l], pids[l]);
        heads[nh].x = x_of(l, true);
        snprintf(heads[nh++].name, sizeof heads[0].name, "RNIC %c (softdat)", 'A' + l);
    }
    heads[nh].x = wire_x();
    snprintf(heads[nh++].name, sizeof heads[0].name, "wire (TCP)");
    fprintf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"wire\"/>\n", wire_x(), TOP - 10, wire_x(),
            height - 10);
    for (int h = 0; h < nh; h++) {
        fprintf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"life\"/>", heads[h].x, TOP - 10, heads[h].x,
                height - 10);
        text(o, heads[h].x, 30, "middle", "hd", heads[h].name);
        fputc('\n', o);
    }

    for (size_t i = 0; i < n; i++) {
        if (row[i] < 0)
            continue;
        const char *err;
        if (!rec_parse(e[i].line, &r, &err))
            continue;
        int y = TOP + row[i] * ROW + ROW / 2;
        int lane = e[i].lane > 1 ? 1 : e[i].lane;
        int cx = x_of(lane, false), rx = x_of(lane, true);
        bool right = lane == 1; /* B's consumer is right of its RNIC */
        const char *k = get0(&r, "rec");
        bool ok = get(&r, "rc") == NULL || strcmp(get0(&r, "rc"), "DAT_SUCCESS") == 0;
        char lab[400];
        int tx_ = cx + (right ? 8 : -8);
        const char *anc = right ? "start" : "end";
        if (strcmp(k, "call") == 0) {
            snprintf(lab, sizeof lab, "%s(%s)%s%s%s%s", get0(&r, "fn"), get0(&r, "obj"), get(&r, "new") ? " -> " : "",
                     get0(&r, "new"), ok ? "" : " = ", ok ? "" : get0(&r, "rc"));
            open_g(o, "call", i, lane);
            close_open_g(o, e[i].line);
            fprintf(o, "<circle cx=\"%d\" cy=\"%d\" r=\"3\" fill=\"%s\"/>", cx, y, ok ? "#555" : "#d01c1c");
            text(o, tx_, y + 4, anc, ok ? "dim" : "err", lab);
        } else if (strcmp(k, "post") == 0) {
            snprintf(lab, sizeof lab, "post %s(%s) len=%s cookie=%s%s%s", get0(&r, "op"), get0(&r, "obj"),
                     get0(&r, "len"), get0(&r, "cookie"), ok ? "" : " = ", ok ? "" : get0(&r, "rc"));
            open_g(o, "post", i, lane);
            attr(o, "op", get0(&r, "op"));
            close_open_g(o, e[i].line);
            arrow(o, cx, y, rx, y, "post");
            text(o, (cx + rx) / 2, y - 4, "middle", ok ? "post" : "err", lab);
        } else if (strcmp(k, "event") == 0) {
            bool bad = event_is_error(&r);
            snprintf(lab, sizeof lab, "%s %s %s len=%s", get0(&r, "type"), get0(&r, "op"), get0(&r, "status"),
                     get0(&r, "len"));
            open_g(o, "event", i, lane);
            attr(o, "type", get0(&r, "type"));
            attr(o, "status", get0(&r, "status"));
            attr(o, "op", get0(&r, "op"));
            close_open_g(o, e[i].line);
            arrow(o, rx, y, cx, y, bad ? "ev err" : "ev");
            text(o, (cx + rx) / 2, y - 4, "middle", bad ? "err" : "ok", lab);
        } else if (strcmp(k, "state") == 0) {
            snprintf(lab, sizeof lab, "%s %s: %s", get0(&r, "ep"), get0(&r, "conn"), get0(&r, "to"));
            bool bad = strstr(get0(&r, "to"), "ERROR") != NULL;
            open_g(o, "state", i, lane);
            close_open_g(o, e[i].line);
            text(o, tx_, y + 4, anc, bad ? "err" : "dim", lab);
        } else if (strcmp(k, "log") == 0) {
            snprintf(lab, sizeof lab, "%s: %s", get0(&r, "level"), get0(&r, "msg"));
            open_g(o, "log", i, lane);
            close_open_g(o, e[i].line);
            text(o, rx + (right ? 8 : -8), y + 4, anc, "err", lab);
        } else if (strcmp(k, "memcheck") == 0) {
            bool allowed = strcmp(get0(&r, "allowed"), "true") == 0;
            snprintf(lab, sizeof lab, "check %s stag=%s to=%s len=%s: %s", get0(&r, "access"), get0(&r, "stag"),
                     get0(&r, "to"), get0(&r, "len"), allowed ? "allowed" : get0(&r, "reason"));
            open_g(o, allowed ? "memcheck allowed" : "memcheck denied", i, lane);
            attr(o, "stag", get0(&r, "stag"));
            attr(o, "access", get0(&r, "access"));
            close_open_g(o, e[i].line);
            int w = 380, x0 = rx - w / 2;
            fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" class=\"%s\"/>", x0, y - 9, w, 17,
                    allowed ? "ok" : "err");
            text(o, x0 + w / 2, y + 4, "middle", allowed ? "ok" : "err", lab);
            fputs("</g>\n", o);
            if (placement_after(&r))
                draw_placement(o, &r, i, lane, rx, right, y + ROW, e[i].line);
            continue;
        } else if (strcmp(k, "frame") == 0) {
            bool tx = strcmp(get0(&r, "dir"), "tx") == 0;
            bool term = strcmp(get0(&r, "op"), "terminate") == 0 || strcmp(get0(&r, "reject"), "true") == 0 ||
                        strcmp(get0(&r, "crc"), "bad") == 0;
            frame_label(&r, lab, sizeof lab);
            long p = e[i].peer;
            size_t pi = p >= 0 ? pos[p] : 0;
            bool matched = p >= 0 && row[pi] >= 0 && e[pi].lane != e[i].lane;
            if (!tx && matched)
                goto placement; /* the arrow is drawn from the sender's row */
            open_g(o, "frame", i, lane);
            attr(o, "dir", tx ? "tx" : "rx");
            attr(o, "op", get0(&r, "op"));
            attr(o, "kind", get0(&r, "kind"));
            attr(o, "stag", get0(&r, "stag"));
            attr(o, "to", get0(&r, "to"));
            attr(o, "matched", matched ? "1" : "0");
            close_open_g(o, e[i].line);
            int x1, y1, x2, y2;
            if (matched) {
                int plane = e[pi].lane > 1 ? 1 : e[pi].lane;
                x1 = rx, y1 = y, x2 = x_of(plane, true), y2 = TOP + row[pi] * ROW + ROW / 2;
            } else if (tx) {
                x1 = rx, y1 = y, x2 = wire_x(), y2 = y;
            } else {
                x1 = wire_x(), y1 = y, x2 = rx, y2 = y;
            }
            arrow(o, x1, y1, x2, y2, term ? "fr term" : "fr");
            text(o, (x1 + x2) / 2, (y1 + y2) / 2 - 5, "middle", term ? "err" : "", lab);
            fputs("</g>\n", o);
            if (tx)
                continue;
        placement:
            if (placement_after(&r))
                draw_placement(o, &r, i, lane, rx, right, y + ROW, e[i].line);
            continue;
        } else {
            continue;
        }
        fputs("</g>\n", o);
    }
    fputs("</svg></div>\n<div id=\"p\"><b>record</b><p class=\"dim\">Click an arrow, box or label.</p><pre "
          "id=\"rec\"></pre></div>\n",
          o);
    /* The records, for the panel: the trace lines as a JSON array ("</" escaped). */
    fputs("<script type=\"application/json\" id=\"recs\">[", o);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(',', o);
        for (const char *s = e[i].line; *s; s++) {
            if (s[0] == '<' && s[1] == '/')
                fputs("<\\", o);
            else
                fputc(*s, o);
        }
    }
    fputs("]</script>\n<script>\n"
          "(function(){var R=JSON.parse(document.getElementById('recs').textContent),sel=null;\n"
          "document.querySelectorAll('#seq g[data-i]').forEach(function(g){g.addEventListener('click',function(){\n"
          "if(sel)sel.classList.remove('sel');sel=g;g.classList.add('sel');\n"
          "document.getElementById('rec').textContent=JSON.stringify(R[+g.getAttribute('data-i')],null,1);});});})();\n"
          "</script>\n</body></html>\n",
          o);
    free(pos);
    free(row);
    return 0;
}
