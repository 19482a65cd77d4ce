/* fetch_add: a shared counter in the server's memory, incremented by the
 * client with atomic fetch-and-add (an InfiniBand extension,
 * dat_ib_post_fetch_and_add).
 *
 * What it shows:
 *  - The target registers an 8-byte counter with
 *    DAT_IB_MEM_PRIV_REMOTE_ATOMIC (atomics need their own privilege).
 *  - Each fetch-and-add adds to the remote counter atomically and returns
 *    the value it had BEFORE into a local 8-byte buffer of the requester.
 *    That makes it a ticket dispenser: every caller gets a distinct value.
 *  - As with RDMA Read and Write, the target's program gets no event.
 *
 * In the trace: three client "post" op=fetch_add add=0x5, three client
 * IB_DTO events ext=fetch_add; nothing on the server until "bye". */
#include "common.h"

int main(int argc, char **argv)
{
    bool server = ex_is_server(argc, argv);
    struct ex x;
    ex_open(&x, server ? "server" : "client");
    ex_ep(&x);
    struct ex_buf word;
    DAT_MEM_PRIV_FLAGS priv = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    if (server)
        priv |= (DAT_MEM_PRIV_FLAGS)DAT_IB_MEM_PRIV_REMOTE_ATOMIC;
    ex_reg(&x, &word, 8, priv);
    uint64_t *counter = (uint64_t *)(void *)word.p;

    if (server) {
        *counter = 100;
        ex_accept(&x, ex_port(argc, argv));
        ex_send_buf(&x, &word);
        ex_bye(&x, true);
        ex_say("counter is now %llu", (unsigned long long)*counter);
        EX_CHECK(*counter == 115, "counter %llu, want 115", (unsigned long long)*counter);
    } else {
        ex_connect(&x, argc, argv);
        DAT_RMR_TRIPLET remote = ex_recv_buf(&x);
        for (uint64_t i = 0; i < 3; i++) {
            *counter = 0;
            DAT_LMR_TRIPLET result = ex_local(&word, 0, 8);
            EX_MUST(dat_ib_post_fetch_and_add(x.ep, 5, &result, ex_cookie(10 + i), &remote,
                                              DAT_COMPLETION_DEFAULT_FLAG));
            ex_wait_dto(x.req, "fetch-and-add", 10 + i, DAT_DTO_SUCCESS);
            ex_say("fetch-and-add 5 returned %llu", (unsigned long long)*counter);
            EX_CHECK(*counter == 100 + 5 * i, "got %llu, want %llu", (unsigned long long)*counter,
                     (unsigned long long)(100 + 5 * i));
        }
        ex_bye(&x, false);
    }
    ex_unreg(&word);
    ex_close(&x);
    return 0;
}
