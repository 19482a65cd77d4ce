/* protection: what happens when the requester names memory it may not
 * touch. Two connections, one mistake each:
 *   1. a wrong key: the RMR context with some bits flipped;
 *   2. out of bounds: the right key, but 4 KiB past the end of the buffer.
 *
 * What it shows:
 *  - The TARGET's RNIC checks every remote access against its memory
 *    table (STag/key, protection zone, privilege, bounds) and refuses this
 *    one; the target's memory is untouched.
 *  - The requester's operation completes in error,
 *    DAT_DTO_ERR_REMOTE_ACCESS, and the connection is then BROKEN: RDMA
 *    does not survive a protection error (iWARP sends a Terminate, and
 *    both sides get DAT_CONNECTION_EVENT_BROKEN or DISCONNECTED).
 *  - Whatever else was posted on that EP completes DAT_DTO_ERR_FLUSHED.
 *
 * The Read is used because it is outstanding until the target answers, so
 * the error is reported on the operation itself (an RDMA Write's
 * completion may come before the target's verdict).
 *
 * In the trace: client "post" op=rdma_read with the bad rmr_ctx /
 * remote_addr, client DTO_COMPLETION status ERR_REMOTE_ACCESS, then
 * CONNECTION_BROKEN and "state" to DISCONNECTED on both sides. */
#include "common.h"

#define LEN 4096

static const char *const cases[] = {"wrong key", "out of bounds"};

int main(int argc, char **argv)
{
    bool server = ex_is_server(argc, argv);
    struct ex x;
    ex_open(&x, server ? "server" : "client");
    struct ex_buf buf;
    DAT_MEM_PRIV_FLAGS priv = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    if (server)
        priv |= DAT_MEM_PRIV_REMOTE_READ_FLAG;
    ex_reg(&x, &buf, LEN, priv);
    memset(buf.p, 0xCC, LEN);

    for (int c = 0; c < 2; c++) {
        ex_ep(&x);
        if (server) {
            ex_accept(&x, ex_port(argc, argv));
            ex_send_buf(&x, &buf);
            /* The client's bad Read never shows up here as an event: the
             * RNIC refuses it. What we see is the connection breaking. */
            DAT_EVENT ev = ex_wait(x.conn, "the end of the connection");
            EX_CHECK(ev.event_number == DAT_CONNECTION_EVENT_BROKEN ||
                         ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
                     "event 0x%x", ev.event_number);
            ex_say("%s: connection %s", cases[c],
                   ev.event_number == DAT_CONNECTION_EVENT_BROKEN ? "BROKEN" : "DISCONNECTED");
        } else {
            ex_connect(&x, argc, argv);
            DAT_RMR_TRIPLET r = ex_recv_buf(&x);
            if (c == 0)
                r.rmr_context ^= 0x5555u; /* not the key the server gave us */
            else
                r.virtual_address += LEN; /* right key, past the end */
            r.segment_length = 256;
            DAT_LMR_TRIPLET dst = ex_local(&buf, 0, 256);
            EX_MUST(dat_ep_post_rdma_read(x.ep, 1, &dst, ex_cookie(66), &r, DAT_COMPLETION_DEFAULT_FLAG));
            ex_wait_dto(x.req, "the refused read", 66, DAT_DTO_ERR_REMOTE_ACCESS);
            DAT_EVENT ev = ex_wait(x.conn, "the broken connection");
            EX_CHECK(ev.event_number == DAT_CONNECTION_EVENT_BROKEN, "event 0x%x", ev.event_number);
            ex_say("%s: the read completed DAT_DTO_ERR_REMOTE_ACCESS, connection BROKEN", cases[c]);
        }
        /* The control receives left on the EP completed FLUSHED: reap them,
         * then a fresh EP for the next connection. */
        ex_reap_flushed(&x);
        EX_MUST(dat_ep_free(x.ep));
        x.ep = DAT_HANDLE_NULL;
    }
    int changed = 0;
    for (int i = 0; i < LEN; i++)
        changed += (unsigned char)buf.p[i] != 0xCC;
    EX_CHECK(changed == 0, "%d bytes changed", changed);
    ex_unreg(&buf);
    ex_close(&x);
    return 0;
}
