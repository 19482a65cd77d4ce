/* write_imm: RDMA Write with immediate data (an InfiniBand extension,
 * dat_ib_post_rdma_write_immed; iWARP carries it with RFC 7306).
 *
 * What it shows:
 *  - A Write that DOES notify the target: the bytes are placed like a
 *    plain RDMA Write, then 32 bits of "immediate data" travel with it and
 *    consume one of the target's posted receives.
 *  - The target gets a DAT_IB_DTO_EVENT on its receive EVD: operation
 *    DAT_IB_DTO_RECV_IMMED, type DAT_IB_RDMA_WRITE_IMMED_DATA, the
 *    immediate value, and transfered_length = the bytes written (its
 *    receive buffer stays untouched).
 *  - One operation instead of "Write + notifying Send".
 *
 * In the trace: client "post" op=write_imm imm=0x1234; client event
 * IB_DTO ext=write_imm; server event IB_DTO ext=write_imm_data imm=0x1234
 * len=512 on its receive EVD. */
#include "common.h"

#define LEN 512
#define IMM 0x1234u

int main(int argc, char **argv)
{
    bool server = ex_is_server(argc, argv);
    struct ex x;
    ex_open(&x, server ? "server" : "client");
    ex_ep(&x);
    struct ex_buf buf;
    DAT_MEM_PRIV_FLAGS priv = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    if (server)
        priv |= DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
    ex_reg(&x, &buf, LEN, priv);

    if (server) {
        ex_accept(&x, ex_port(argc, argv));
        ex_send_buf(&x, &buf);
        /* The write-with-immediate takes our next posted receive (a
         * control slot here) and completes it as an extension event. */
        int slot = x.ctl_next;
        DAT_EVENT ev = ex_wait(x.rcv, "write with immediate");
        EX_CHECK(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT, "event 0x%x", ev.event_number);
        DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
        const DAT_IB_EXTENSION_EVENT_DATA *xd = (const DAT_IB_EXTENSION_EVENT_DATA *)(void *)ev.event_extension_data;
        EX_CHECK(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == 1000 + (uint64_t)slot, "status %d",
                 (int)d.status);
        EX_CHECK(xd->type == DAT_IB_RDMA_WRITE_IMMED_DATA, "ext type %d", (int)xd->type);
        EX_CHECK(xd->val.immed.data == IMM, "immediate 0x%x", xd->val.immed.data);
        EX_CHECK(d.transfered_length == LEN, "length %u", (unsigned)d.transfered_length);
        x.ctl_next = (slot + 1) % EX_CTL_SLOTS;
        ex_post_ctl_recv(&x, slot);
        int bad = 0;
        for (int i = 0; i < LEN; i++)
            bad += buf.p[i] != (char)(i + 3);
        EX_CHECK(bad == 0, "%d bytes differ", bad);
        ex_say("write with immediate 0x%x: %u bytes placed, and I was told", xd->val.immed.data,
               (unsigned)d.transfered_length);
        ex_bye(&x, true);
    } else {
        ex_connect(&x, argc, argv);
        DAT_RMR_TRIPLET target = ex_recv_buf(&x);
        for (int i = 0; i < LEN; i++)
            buf.p[i] = (char)(i + 3);
        DAT_LMR_TRIPLET src = ex_local(&buf, 0, LEN);
        EX_MUST(dat_ib_post_rdma_write_immed(x.ep, 1, &src, ex_cookie(3), &target, IMM, DAT_COMPLETION_DEFAULT_FLAG));
        DAT_EVENT ev = ex_wait(x.req, "write-immediate completion");
        EX_CHECK(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT, "event 0x%x", ev.event_number);
        EX_CHECK(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "status %d",
                 (int)ev.event_data.dto_completion_event_data.status);
        ex_say("write with immediate 0x%x completed", IMM);
        ex_bye(&x, false);
    }
    ex_unreg(&buf);
    ex_close(&x);
    return 0;
}
