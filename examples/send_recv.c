/* send_recv: two-sided messaging, the RDMA version of send()/recv().
 *
 * What it shows:
 *  - The receiver posts a receive buffer BEFORE the message can arrive
 *    (dat_ep_post_recv). There is no buffering behind the receive queue:
 *    a Send that finds no posted receive is an error, not a wait.
 *  - Receives are consumed in the order they were posted.
 *  - Both sides get a completion: the sender's says "my buffer may be
 *    reused", the receiver's says "a message is in your buffer", with its
 *    length (transfered_length) and the cookie the receiver chose.
 *
 * In the trace: server "post" op=recv cookie 0x7 (before the connection),
 * client "post" op=send cookie 0x2a len 14, server "event" DTO_COMPLETION
 * op=receive len=14 cookie 0x7, client "event" DTO_COMPLETION op=send. */
#include "common.h"

#define MSG "hello, server"

int main(int argc, char **argv)
{
    bool server = ex_is_server(argc, argv);
    struct ex x;
    ex_open(&x, server ? "server" : "client");
    struct ex_buf buf;
    ex_reg(&x, &buf, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG);

    if (server) {
        ex_ep_bare(&x);
        /* First receive: our 4 KiB buffer, cookie 7. The first Send the
         * client makes lands here. */
        DAT_LMR_TRIPLET r = ex_local(&buf, 0, buf.len);
        EX_MUST(dat_ep_post_recv(x.ep, 1, &r, ex_cookie(7), DAT_COMPLETION_DEFAULT_FLAG));
        ex_ctl_post_all(&x); /* later receives: for the example's "bye" */
        ex_accept(&x, ex_port(argc, argv));
        DAT_DTO_COMPLETION_EVENT_DATA d = ex_wait_dto(x.rcv, "the message", 7, DAT_DTO_SUCCESS);
        EX_CHECK(d.transfered_length == sizeof MSG, "length %u", (unsigned)d.transfered_length);
        EX_CHECK(d.operation == DAT_DTO_RECEIVE, "operation %d", (int)d.operation);
        ex_say("received %u bytes: \"%s\"", (unsigned)d.transfered_length, buf.p);
        EX_CHECK(strcmp(buf.p, MSG) == 0, "wrong message");
        ex_bye(&x, true);
    } else {
        ex_ep(&x);
        ex_connect(&x, argc, argv);
        memcpy(buf.p, MSG, sizeof MSG);
        DAT_LMR_TRIPLET t = ex_local(&buf, 0, sizeof MSG);
        EX_MUST(dat_ep_post_send(x.ep, 1, &t, ex_cookie(42), DAT_COMPLETION_DEFAULT_FLAG));
        DAT_DTO_COMPLETION_EVENT_DATA d = ex_wait_dto(x.req, "send completion", 42, DAT_DTO_SUCCESS);
        ex_say("send of %u bytes completed (cookie %llu)", (unsigned)d.transfered_length,
               (unsigned long long)d.user_cookie.as_64);
        ex_bye(&x, false);
    }
    ex_unreg(&buf);
    ex_close(&x);
    return 0;
}
