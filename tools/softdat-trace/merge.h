/* softdat-trace: the merged timeline shared by the views (main.c text and
 * JSON, html.c diagram) and the clock alignment (align.c). */
#ifndef SOFTDAT_TOOLS_TRACE_MERGE_H
#define SOFTDAT_TOOLS_TRACE_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_LANES 8

struct entry {
    uint64_t mono;  /* CLOCK_MONOTONIC of the record, corrected by its lane's offset */
    int lane;
    size_t seq;     /* input order: keeps equal timestamps stable; index into peer[] */
    long peer;      /* frames: the seq of the same frame in another lane, or -1 */
    char *line;
};

/* Match every frame one lane sent with the same frame another lane
 * received (same flow, stream offset and kind), set entry.peer both ways,
 * and estimate each lane's clock offset against lane 0 from the minimum
 * one-way delays in both directions: offset = (min d(0->i) - min d(i->0)) / 2.
 * offset_ns[i] is what lane i's mono_ns is ahead by (0 for lane 0, and for
 * a lane with no frames matched both ways). Returns the number of pairs;
 * fills *pairs_with[i] with lane i's pair count against lane 0. */
size_t align_lanes(struct entry *e, size_t n, int nlanes, int64_t *offset_ns, size_t *pairs_with);

/* The self-contained HTML/SVG sequence diagram of a merged timeline of 1
 * or 2 lanes (e sorted by mono; peers set). */
int render_html(FILE *out, const struct entry *e, size_t n, int nlanes, char labels[][64], const int *pids,
                const int64_t *offset_ns);

#endif
