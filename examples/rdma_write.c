/* rdma_write: a one-sided write into the peer's memory, then a Send to
 * tell it so.
 *
 * What it shows:
 *  - The target exposes a buffer: registers it with
 *    DAT_MEM_PRIV_REMOTE_WRITE_FLAG and gives the requester its address,
 *    length and RMR context (the "key"; an STag on the wire).
 *  - The requester's RDMA Write (dat_ep_post_rdma_write) places the bytes
 *    straight into that memory. The target's program is not involved at
 *    all: no receive is consumed, and NO EVENT reaches the target. That
 *    is the point of RDMA, and its trap: the target cannot know when the
 *    data is there...
 *  - ...unless told. The usual pattern is a "notifying Send" after the
 *    Write: operations on one connection are placed in order, so when the
 *    target's receive completes, the Write's bytes are already in place.
 *
 * In the trace: client "post" op=rdma_write with rmr_ctx/remote_addr, the
 * client's DTO_COMPLETION op=rdma_write; the server has NO event for the
 * write, only the receive of the notifying Send ("written"). */
#include "common.h"

#define LEN 1024

int main(int argc, char **argv)
{
    bool server = ex_is_server(argc, argv);
    struct ex x;
    ex_open(&x, server ? "server" : "client");
    ex_ep(&x);
    struct ex_buf buf;
    DAT_MEM_PRIV_FLAGS priv = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    if (server)
        priv |= DAT_MEM_PRIV_REMOTE_WRITE_FLAG; /* the peer may write here */
    ex_reg(&x, &buf, LEN, priv);

    if (server) {
        ex_accept(&x, ex_port(argc, argv));
        ex_send_buf(&x, &buf); /* address, length, RMR context */
        /* Nothing to do while the client writes: no event will come for
         * the Write itself. We wait for the notifying Send. */
        const char *m = ex_recv_ctl(&x, 8);
        EX_CHECK(strcmp(m, "written") == 0, "expected \"written\"");
        int bad = 0;
        for (int i = 0; i < LEN; i++)
            bad += buf.p[i] != (char)(i * 7 + 1);
        EX_CHECK(bad == 0, "%d bytes differ from what the client wrote", bad);
        ex_say("the client's %d bytes are in my buffer; I saw no event for them", LEN);
        ex_bye(&x, true);
    } else {
        ex_connect(&x, argc, argv);
        DAT_RMR_TRIPLET target = ex_recv_buf(&x);
        for (int i = 0; i < LEN; i++)
            buf.p[i] = (char)(i * 7 + 1);
        DAT_LMR_TRIPLET src = ex_local(&buf, 0, LEN);
        EX_MUST(dat_ep_post_rdma_write(x.ep, 1, &src, ex_cookie(1), &target, DAT_COMPLETION_DEFAULT_FLAG));
        ex_wait_dto(x.req, "write completion", 1, DAT_DTO_SUCCESS);
        ex_say("RDMA Write of %d bytes completed", LEN);
        ex_send_ctl(&x, "written", 8); /* the notifying Send */
        ex_bye(&x, false);
    }
    ex_unreg(&buf);
    ex_close(&x);
    return 0;
}
