/* srq: one shared receive queue feeding two connections.
 *
 * What it shows:
 *  - Receives posted to an SRQ (dat_srq_post_recv) are not tied to one
 *    EP: whichever connection's Send arrives first takes the next one. A
 *    server with many clients posts receives for all of them in one place
 *    instead of per connection.
 *  - The EPs are created with dat_ep_create_with_srq; their receive
 *    completions still name the EP that received (ep_handle in the event).
 *
 * The client opens two connections and sends 2 messages on each; the
 * server posted 4 receives to its SRQ and gets all 4, from both EPs.
 *
 * In the trace: server "post" fn=srq_post_recv (x4, obj srq1) before any
 * connection; server DTO_COMPLETION op=receive events naming ep1 and ep2. */
#include "common.h"

#define NCONN 2
#define PER_CONN 2
#define SLOT 64

int main(int argc, char **argv)
{
    bool server = ex_is_server(argc, argv);
    struct ex x;
    ex_open(&x, server ? "server" : "client");
    struct ex_buf buf;
    ex_reg(&x, &buf, NCONN * PER_CONN * SLOT, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
    DAT_EP_HANDLE ep[NCONN];
    DAT_EP_ATTR a;
    ex_ep_attr(&a);

    if (server) {
        DAT_SRQ_ATTR sa = {.max_recv_dtos = 8, .max_recv_iov = 1, .low_watermark = DAT_SRQ_LW_DEFAULT};
        DAT_SRQ_HANDLE srq;
        EX_MUST(dat_srq_create(x.ia, x.pz, &sa, &srq));
        for (int i = 0; i < NCONN * PER_CONN; i++) {
            DAT_LMR_TRIPLET t = ex_local(&buf, (size_t)i * SLOT, SLOT);
            EX_MUST(dat_srq_post_recv(srq, 1, &t, ex_cookie(100 + (uint64_t)i)));
        }
        a.max_recv_dtos = DAT_HW_DEFAULT; /* the SRQ holds the receives */
        EX_MUST(dat_psp_create(x.ia, ex_port(argc, argv), x.cr, DAT_PSP_CONSUMER_FLAG, &x.psp));
        for (int i = 0; i < NCONN; i++) {
            EX_MUST(dat_ep_create_with_srq(x.ia, x.pz, x.rcv, x.req, x.conn, srq, &a, &ep[i]));
            DAT_EVENT ev = ex_wait(x.cr, "a connection request");
            EX_CHECK(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "event 0x%x", ev.event_number);
            EX_MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep[i], 0, NULL));
            ev = ex_wait(x.conn, "established");
            EX_CHECK(ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED, "event 0x%x", ev.event_number);
        }
        ex_say("%d connections share one receive queue", NCONN);
        int from[NCONN] = {0};
        for (int i = 0; i < NCONN * PER_CONN; i++) {
            DAT_EVENT ev = ex_wait(x.rcv, "a message");
            DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
            EX_CHECK(ev.event_number == DAT_DTO_COMPLETION_EVENT && d.status == DAT_DTO_SUCCESS, "event 0x%x %d",
                     ev.event_number, (int)d.status);
            int k = d.ep_handle == ep[0] ? 0 : d.ep_handle == ep[1] ? 1 : -1;
            EX_CHECK(k >= 0, "a receive completion for an EP we do not know");
            from[k]++;
            ex_say("receive cookie %llu: \"%s\" on connection %d", (unsigned long long)d.user_cookie.as_64,
                   buf.p + (d.user_cookie.as_64 - 100) * SLOT, k + 1);
        }
        EX_CHECK(from[0] == PER_CONN && from[1] == PER_CONN, "messages per connection: %d %d", from[0], from[1]);
        for (int i = 0; i < NCONN; i++) {
            DAT_EVENT ev = ex_wait(x.conn, "disconnected");
            EX_CHECK(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "event 0x%x", ev.event_number);
        }
        for (int i = 0; i < NCONN; i++)
            EX_MUST(dat_ep_free(ep[i]));
        EX_MUST(dat_srq_free(srq));
    } else {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        inet_pton(AF_INET, argc > 3 ? argv[3] : "127.0.0.1", &sa.sin_addr);
        for (int i = 0; i < NCONN; i++) {
            EX_MUST(dat_ep_create(x.ia, x.pz, x.rcv, x.req, x.conn, &a, &ep[i]));
            x.ep = ep[i];
            DAT_EVENT_NUMBER n = ex_connect_once(&x, argc > 3 ? argv[3] : "127.0.0.1", ex_port(argc, argv), 50);
            EX_CHECK(n == DAT_CONNECTION_EVENT_ESTABLISHED, "connect %d: event 0x%x", i + 1, n);
        }
        for (int m = 0; m < PER_CONN; m++)
            for (int i = 0; i < NCONN; i++) {
                char *p = buf.p + (size_t)(m * NCONN + i) * SLOT;
                int len = snprintf(p, SLOT, "message %d on connection %d", m + 1, i + 1) + 1;
                DAT_LMR_TRIPLET t = ex_local(&buf, (size_t)(p - buf.p), (size_t)len);
                uint64_t c = 10 * (uint64_t)i + (uint64_t)m;
                EX_MUST(dat_ep_post_send(ep[i], 1, &t, ex_cookie(c), DAT_COMPLETION_DEFAULT_FLAG));
                ex_wait_dto(x.req, "send", c, DAT_DTO_SUCCESS);
            }
        /* Sent bytes arrive before the disconnect: TCP keeps the order. */
        for (int i = 0; i < NCONN; i++) {
            EX_MUST(dat_ep_disconnect(ep[i], DAT_CLOSE_GRACEFUL_FLAG));
            DAT_EVENT ev = ex_wait(x.conn, "disconnected");
            EX_CHECK(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "event 0x%x", ev.event_number);
        }
        ex_reap_flushed(&x);
        for (int i = 0; i < NCONN; i++)
            EX_MUST(dat_ep_free(ep[i]));
        ex_say("sent %d messages on each of %d connections", PER_CONN, NCONN);
    }
    x.ep = DAT_HANDLE_NULL;
    ex_unreg(&buf);
    ex_close(&x);
    return 0;
}
