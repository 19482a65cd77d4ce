/* test/lib/rc_pair.h: a connected client/server EP pair through the provider table. */
#include "test/lib/rc_pair.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "emu/engine.h"
#include "lib/provider/ep.h"

void rp_attr(DAT_EP_ATTR *a, DAT_COMPLETION_FLAGS req_flags, DAT_COMPLETION_FLAGS recv_flags)
{
    sd_ep_default_attr(a);
    a->max_recv_dtos = 8;
    a->max_request_dtos = 8;
    a->max_recv_iov = 2;
    a->max_request_iov = 3;
    a->max_rdma_read_iov = 1;
    a->max_rdma_write_iov = 2;
    a->request_completion_flags = req_flags;
    a->recv_completion_flags = recv_flags;
}

void rp_lmr(struct rp_side *s, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv, DAT_LMR_HANDLE *lmr, DAT_LMR_CONTEXT *lc,
            DAT_RMR_CONTEXT *rc)
{
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = s->buf;
    DAT_VLEN sz;
    DAT_VADDR va;
    DAT_RMR_CONTEXT dummy;
    ck_assert_dat_ok(s->p->lmr_create_func(s->ia, DAT_MEM_TYPE_VIRTUAL, rd, RP_BUF, pz, priv, DAT_VA_TYPE_VA, lmr, lc,
                                           rc ? rc : &dummy, &sz, &va));
}

void rp_side_open(struct rp_side *s, DAT_PROVIDER *p)
{
    memset(s, 0, sizeof *s);
    s->p = p;
    s->ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->pz_create_func(s->ia, &s->pz));
    ck_assert_dat_ok(p->pz_create_func(s->ia, &s->pz2));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &s->cr));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn));
    ck_assert_dat_ok(
        p->evd_create_func(s->ia, 256, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &s->req));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 256, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->rcv));
    s->buf = aligned_alloc(64, RP_BUF);
    ck_assert_ptr_nonnull(s->buf);
    memset(s->buf, 0, RP_BUF);
    rp_lmr(s, s->pz, DAT_MEM_PRIV_ALL_FLAG, &s->lmr, &s->lc, &s->rc);
    rp_lmr(s, s->pz, DAT_MEM_PRIV_LOCAL_READ_FLAG, &s->lmr_ro, &s->lc_ro, NULL);
    rp_lmr(s, s->pz2, DAT_MEM_PRIV_ALL_FLAG, &s->lmr_pz2, &s->lc_pz2, NULL);
    rp_lmr(s, s->pz, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
           &s->lmr_rw, &s->lc_rw, &s->rc_rw);
}

void rp_side_close(struct rp_side *s)
{
    ck_assert_dat_ok(s->p->ia_close_func(s->ia, DAT_CLOSE_ABRUPT_FLAG));
    free(s->buf);
}

DAT_EVENT rp_wait(struct rp_side *s, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want)
{
    return fx_wait(s->p, evd, want);
}

DAT_DTO_COMPLETION_EVENT_DATA rp_dto(struct rp_side *s, DAT_EVD_HANDLE evd)
{
    return rp_wait(s, evd, DAT_DTO_COMPLETION_EVENT).event_data.dto_completion_event_data;
}

void rp_none(struct rp_side *s, DAT_EVD_HANDLE evd, DAT_TIMEOUT us)
{
    fx_none(s->p, evd, us);
}

DAT_EP_STATE rp_state(struct rp_side *s, DAT_EP_HANDLE ep)
{
    return fx_ep_state(s->p, ep);
}

DAT_EP_HANDLE rp_ep(struct rp_side *s, const DAT_EP_ATTR *a)
{
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->ep_create_func(s->ia, s->pz, s->rcv, s->req, s->conn, a, &ep));
    return ep;
}

DAT_EP_HANDLE rp_connect(struct rp_pair *x, DAT_EP_HANDLE cep, const DAT_EP_ATTR *sa)
{
    struct rp_side *c = &x->c, *s = &x->s;
    DAT_EP_HANDLE sep = rp_ep(s, sa);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_dat_ok(c->p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, x->port, 5000000, 0, NULL,
                                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev = rp_wait(s, s->cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(s->p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, sep, 0, NULL));
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    rp_wait(s, s->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(rp_state(c, cep), DAT_EP_STATE_CONNECTED);
    ck_assert_int_eq(rp_state(s, sep), DAT_EP_STATE_CONNECTED);
    return sep;
}

void rp_open_params(struct rp_pair *x, const char *name, const char *params, const DAT_EP_ATTR *ca,
                    const DAT_EP_ATTR *sa)
{
    memset(x, 0, sizeof *x);
    DAT_PROVIDER *p = fx_provider(name, params, DAT_FALSE);
    rp_side_open(&x->c, p);
    rp_side_open(&x->s, p);
    DAT_EP_ATTR def;
    rp_attr(&def, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    ck_assert_dat_ok(p->psp_create_any_func(x->s.ia, &x->port, x->s.cr, DAT_PSP_CONSUMER_FLAG, &x->psp));
    x->cep = rp_ep(&x->c, ca ? ca : &def);
    x->sep = rp_connect(x, x->cep, sa ? sa : &def);
}

void rp_open(struct rp_pair *x, const char *name, const DAT_EP_ATTR *ca, const DAT_EP_ATTR *sa)
{
    rp_open_params(x, name, "lo", ca, sa);
}

void rp_close(struct rp_pair *x)
{
    rp_side_close(&x->c);
    rp_side_close(&x->s);
}

static void rp_stall_job(void *arg)
{
    struct rp_stall *b = arg;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5; /* bounded: a test that forgets to release still ends */
    pthread_mutex_lock(&b->mu);
    b->state = 1;
    pthread_cond_broadcast(&b->cv);
    while (b->state == 1)
        if (pthread_cond_timedwait(&b->cv, &b->mu, &dl) != 0)
            break;
    b->state = 3;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

void rp_stall_begin(struct rp_stall *b, DAT_IA_HANDLE ia)
{
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->state = 0;
    ck_assert_int_eq(emu_engine_run_async(((struct sd_ia *)ia)->engine, rp_stall_job, b), 0);
    pthread_mutex_lock(&b->mu);
    while (b->state == 0)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

void rp_stall_end(struct rp_stall *b)
{
    pthread_mutex_lock(&b->mu);
    if (b->state == 1)
        b->state = 2;
    pthread_cond_broadcast(&b->cv);
    while (b->state != 3)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}
