/* reject: the passive side turns a connection request down.
 *
 * What it shows:
 *  - A connection request arrives at the server as an event
 *    (DAT_CONNECTION_REQUEST_EVENT on the PSP's EVD) carrying a CR handle;
 *    the server decides: dat_cr_accept or dat_cr_reject. Nothing is
 *    connected until it accepts.
 *  - A rejected client gets DAT_CONNECTION_EVENT_PEER_REJECTED (a peer
 *    said no), not NON_PEER_REJECTED (nobody listening) or UNREACHABLE.
 *  - The client's EP goes back to a state where it can be reset and used
 *    again.
 *
 * In the trace: server event CONNECTION_REQUEST, server call cr_reject;
 * client state ACTIVE_CONNECTION_PENDING -> DISCONNECTED, client event
 * CONNECTION_PEER_REJECTED. */
#include "common.h"

int main(int argc, char **argv)
{
    bool server = ex_is_server(argc, argv);
    struct ex x;
    ex_open(&x, server ? "server" : "client");
    if (server) {
        EX_MUST(dat_psp_create(x.ia, ex_port(argc, argv), x.cr, DAT_PSP_CONSUMER_FLAG, &x.psp));
        ex_say("listening");
        DAT_EVENT ev = ex_wait(x.cr, "a connection request");
        EX_CHECK(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "event 0x%x", ev.event_number);
        EX_MUST(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL));
        ex_say("rejected the request");
    } else {
        ex_ep(&x);
        DAT_EVENT_NUMBER n = ex_connect_once(&x, argc > 3 ? argv[3] : "127.0.0.1", ex_port(argc, argv), 50);
        EX_CHECK(n == DAT_CONNECTION_EVENT_PEER_REJECTED, "event 0x%x, want PEER_REJECTED", n);
        ex_say("the server rejected us (DAT_CONNECTION_EVENT_PEER_REJECTED)");
    }
    ex_close(&x);
    return 0;
}
