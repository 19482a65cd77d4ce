/* test/lib/peer.h: failure reporting and event waits of the helper peers. */
#include "test/lib/peer.h"

#include <dirent.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *peer_role = "?";
int peer_failures;

void peer_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", peer_role);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

void peer_check(DAT_RETURN rc, const char *what)
{
    if (rc == DAT_SUCCESS)
        return;
    const char *maj = "?", *min = "";
    dat_strerror(rc, &maj, &min);
    fprintf(stderr, "%s: %s failed: 0x%x %s %s\n", peer_role, what, (unsigned)rc, maj, min);
    exit(1);
}

void peer_expect_failed(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    peer_failures++;
    printf("FAIL %s %s:%d: ", peer_role, file, line);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

void peer_must_failed(const char *file, int line, const char *call, DAT_RETURN rc)
{
    printf("FAIL %s %s:%d: %s = 0x%08x\n", peer_role, file, line, call, (unsigned)rc);
    exit(1);
}

DAT_EVENT peer_wait(DAT_EVD_HANDLE evd, const char *what)
{
    DAT_EVENT ev;
    DAT_COUNT n;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN rc = dat_evd_wait(evd, PEER_WAIT_US, 1, &ev, &n);
    if (rc != DAT_SUCCESS) {
        printf("FAIL %s: waiting for %s: 0x%08x\n", peer_role, what, (unsigned)rc);
        exit(1);
    }
    return ev;
}

DAT_EVENT peer_wait_for(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, const char *what)
{
    DAT_EVENT ev;
    DAT_COUNT n;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN rc = dat_evd_wait(evd, PEER_WAIT_US, 1, &ev, &n);
    if (rc != DAT_SUCCESS)
        peer_fail("waiting for %s: 0x%x", what, (unsigned)rc);
    if (ev.event_number != want)
        peer_fail("waiting for %s (0x%x): got event 0x%x", what, (unsigned)want, (unsigned)ev.event_number);
    return ev;
}

DAT_LMR_TRIPLET peer_triplet(DAT_LMR_CONTEXT lc, const void *addr, DAT_SEG_LENGTH len)
{
    DAT_LMR_TRIPLET t;
    t.lmr_context = lc;
    t.virtual_address = (DAT_VADDR)(uintptr_t)addr;
    t.segment_length = len;
    return t;
}

DAT_DTO_COOKIE peer_cookie(uint64_t v)
{
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

const DAT_IB_EXTENSION_EVENT_DATA *peer_ib_ext(const DAT_EVENT *ev)
{
    return (const DAT_IB_EXTENSION_EVENT_DATA *)(const void *)ev->event_extension_data;
}

const char *peer_provider_attr(const DAT_PROVIDER_ATTR *pa, const char *name)
{
    for (DAT_COUNT i = 0; i < pa->num_provider_specific_attr; i++)
        if (strcmp(pa->provider_specific_attr[i].name, name) == 0)
            return pa->provider_specific_attr[i].value;
    return "(absent)";
}

int peer_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

DAT_DTO_COMPLETION_EVENT_DATA peer_wait_ok(DAT_EVD_HANDLE evd, const char *what)
{
    DAT_EVENT ev = peer_wait(evd, what);
    DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
    if (ev.event_number != DAT_DTO_COMPLETION_EVENT || d.status != DAT_DTO_SUCCESS) {
        printf("FAIL %s: %s: event 0x%x status %d\n", peer_role, what, ev.event_number, (int)d.status);
        exit(1);
    }
    return d;
}

void peer_register(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *buf, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv,
                   DAT_LMR_HANDLE *h, DAT_LMR_CONTEXT *lc, DAT_RMR_CONTEXT *rc)
{
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = buf;
    DAT_VLEN sz;
    DAT_VADDR va;
    DAT_RMR_CONTEXT unused;
    PEER_MUST(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, rd, len, pz, priv, DAT_VA_TYPE_VA, h, lc, rc ? rc : &unused, &sz,
                             &va));
}

DAT_EP_ATTR peer_rc_attr(DAT_VLEN size, DAT_COUNT recvs, DAT_COUNT requests, DAT_COUNT iov, DAT_COUNT reads)
{
    DAT_EP_ATTR a;
    memset(&a, 0, sizeof a);
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = size;
    a.max_rdma_size = size;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.max_recv_dtos = recvs;
    a.max_request_dtos = requests;
    a.max_recv_iov = iov;
    a.max_request_iov = iov;
    a.max_rdma_read_in = reads;
    a.max_rdma_read_out = reads;
    a.max_rdma_read_iov = iov;
    a.max_rdma_write_iov = iov;
    return a;
}

long peer_rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2)
        res = 0;
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}
