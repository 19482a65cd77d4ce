/* rdma_read: a one-sided read of the peer's memory.
 *
 * What it shows:
 *  - The target registers a buffer with DAT_MEM_PRIV_REMOTE_READ_FLAG and
 *    publishes it; the requester's RDMA Read (dat_ep_post_rdma_read)
 *    fetches its bytes into a local buffer.
 *  - Only the requester gets a completion; it means the bytes have
 *    ARRIVED (unlike a Write's completion, which only means they left).
 *    The target's program sees nothing: its RNIC answered the Read Request
 *    on its own.
 *
 * In the trace: client "post" op=rdma_read, client DTO_COMPLETION
 * op=rdma_read len=4096; no DTO event on the server for it. */
#include "common.h"

#define LEN 4096

int main(int argc, char **argv)
{
    bool server = ex_is_server(argc, argv);
    struct ex x;
    ex_open(&x, server ? "server" : "client");
    ex_ep(&x);
    struct ex_buf buf;
    DAT_MEM_PRIV_FLAGS priv = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    if (server)
        priv |= DAT_MEM_PRIV_REMOTE_READ_FLAG; /* the peer may read here */
    ex_reg(&x, &buf, LEN, priv);

    if (server) {
        for (int i = 0; i < LEN; i++)
            buf.p[i] = (char)(i * 13 + 5);
        ex_accept(&x, ex_port(argc, argv));
        ex_send_buf(&x, &buf);
        ex_bye(&x, true); /* the client says bye once it has read */
    } else {
        ex_connect(&x, argc, argv);
        DAT_RMR_TRIPLET source = ex_recv_buf(&x);
        DAT_LMR_TRIPLET dst = ex_local(&buf, 0, LEN);
        EX_MUST(dat_ep_post_rdma_read(x.ep, 1, &dst, ex_cookie(2), &source, DAT_COMPLETION_DEFAULT_FLAG));
        DAT_DTO_COMPLETION_EVENT_DATA d = ex_wait_dto(x.req, "read completion", 2, DAT_DTO_SUCCESS);
        EX_CHECK(d.transfered_length == LEN, "read %u bytes", (unsigned)d.transfered_length);
        int bad = 0;
        for (int i = 0; i < LEN; i++)
            bad += buf.p[i] != (char)(i * 13 + 5);
        EX_CHECK(bad == 0, "%d bytes differ", bad);
        ex_say("read %d bytes of the server's memory", LEN);
        ex_bye(&x, false);
    }
    ex_unreg(&buf);
    ex_close(&x);
    return 0;
}
