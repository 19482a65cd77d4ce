/* Return codes of the service point calls: dat_psp_create,
 * dat_psp_create_any, dat_psp_query, dat_psp_free, dat_rsp_create,
 * dat_rsp_query, dat_rsp_free, dat_csp_create, dat_csp_query, dat_csp_free
 * (L3981-4563): every handle and argument, the qualifier / port in use,
 * the EP states an RSP accepts, the per-IA SP limit and an exhausted
 * create_any range. */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "test/lib/rc_cm_fixture.h"

/* Data for private-data and buffer arguments. */
static _Alignas(64) char junk[256];

/* Handles of every wrong kind for an SP call taking an EVD. */
struct bad_evds {
    DAT_EVD_HANDLE h[7];
    size_t n;
    DAT_PROVIDER *op; /* another IA (another dat.conf name): its EVDs are foreign */
    DAT_IA_HANDLE oia;
};

static struct bad_evds bad_cr_evds(struct side *s, struct side *o)
{
    struct bad_evds b = {.n = 0};
    DAT_EVD_HANDLE dead;
    ck_assert_dat_ok(s->p->evd_create_func(s->ia, 4, NULL, DAT_EVD_CR_FLAG, &dead));
    ck_assert_dat_ok(s->p->evd_free_func(dead));
    b.h[b.n++] = DAT_HANDLE_NULL;
    b.h[b.n++] = (DAT_EVD_HANDLE)junk;
    b.h[b.n++] = (DAT_EVD_HANDLE)s->pz;
    b.h[b.n++] = dead;
    /* Another IA's. Another open instance of the same IA (o) is the same
     * device, whose EVDs may be shared (test_shared_ia). */
    (void)o;
    b.op = fx_provider("t-rc-sp-other", "lo", DAT_FALSE);
    b.oia = fx_open(b.op, NULL);
    ck_assert_dat_ok(b.op->evd_create_func(b.oia, 4, NULL, DAT_EVD_CR_FLAG, &b.h[b.n++]));
    b.h[b.n++] = s->conn; /* no CR stream */
    b.h[b.n++] = s->dto;
    return b;
}

static void bad_cr_evds_done(struct bad_evds *b)
{
    ck_assert_dat_ok(b->op->ia_close_func(b->oia, DAT_CLOSE_ABRUPT_FLAG));
}

START_TEST(psp_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-sp-psp", "lo", DAT_FALSE);
    struct side s, o;
    side_open(&s, p);
    side_open(&o, p);
    DAT_IA_HANDLE dead_ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(dead_ia, DAT_CLOSE_ABRUPT_FLAG));
    DAT_CONN_QUAL q = free_port(&s), aq = 0;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    const DAT_PSP_FLAGS C = DAT_PSP_CONSUMER_FLAG;
    DAT_IA_HANDLE bad_ia[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)s.pz, dead_ia};
    for (size_t i = 0; i < sizeof bad_ia / sizeof bad_ia[0]; i++) {
        ck_assert_dat_err(p->psp_create_func(bad_ia[i], q, s.cr, C, &psp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        ck_assert_dat_err(p->psp_create_any_func(bad_ia[i], &aq, s.cr, C, &psp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_IA);
    }
    struct bad_evds be = bad_cr_evds(&s, &o);
    for (size_t i = 0; i < be.n; i++) {
        ck_assert_dat_err(p->psp_create_func(s.ia, q, be.h[i], C, &psp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_CR);
        ck_assert_dat_err(p->psp_create_any_func(s.ia, &aq, be.h[i], C, &psp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_CR);
    }
    bad_cr_evds_done(&be);
    ck_assert_dat_err(p->psp_create_func(s.ia, 0, s.cr, C, &psp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->psp_create_func(s.ia, 0x30000, s.cr, C, &psp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->psp_create_func(s.ia, q, s.cr, (DAT_PSP_FLAGS)2, &psp), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(p->psp_create_func(s.ia, q, s.cr, C, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_err(p->psp_create_any_func(s.ia, NULL, s.cr, C, &psp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->psp_create_any_func(s.ia, &aq, s.cr, (DAT_PSP_FLAGS)7, &psp), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(p->psp_create_any_func(s.ia, &aq, s.cr, C, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_ptr_null(psp);
    /* Nothing above took the EVD or the port. */
    ck_assert_dat_ok(p->psp_create_func(s.ia, q, s.cr, DAT_PSP_PROVIDER_FLAG, &psp));
    /* In use: the same qualifier, the same low 16 bits, an RSP there, and
     * a port another socket holds (L4024). */
    DAT_PSP_HANDLE psp2 = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->psp_create_func(s.ia, q, s.cr, C, &psp2), DAT_CONN_QUAL_IN_USE, 0);
    ck_assert_dat_err(p->psp_create_func(s.ia, q | 0x10000, s.cr, C, &psp2), DAT_CONN_QUAL_IN_USE, 0);
    ck_assert_dat_err(p->psp_create_func(o.ia, q, o.cr, C, &psp2), DAT_CONN_QUAL_IN_USE, 0); /* same address */
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = mk_ep(&s);
    ck_assert_dat_err(p->rsp_create_func(s.ia, q, ep, s.cr, &rsp), DAT_CONN_QUAL_IN_USE, 0);
    ck_assert_int_eq(ep_state(&s, ep), DAT_EP_STATE_UNCONNECTED);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    DAT_CONN_QUAL held = free_port(&s);
    /* SO_REUSEADDR, as our listeners have: the port create_any found free
     * may hold TIME_WAIT sockets of an earlier test's listener there, which
     * a plain bind refuses (EADDRINUSE), a listening one still blocks. */
    int one = 1;
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
    struct sockaddr_in ha = v4("127.0.0.1", (unsigned)held);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&ha, sizeof ha), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    ck_assert_dat_err(p->psp_create_func(s.ia, held, s.cr, C, &psp2), DAT_CONN_QUAL_IN_USE, 0);
    close(fd);
    ck_assert_ptr_null(psp2);
    /* create_any: a port of the documented range, reported by query. */
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &aq, s.cr, C, &psp2));
    ck_assert_uint_ge(aq, 20000);
    ck_assert_uint_le(aq, 32767);
    DAT_PSP_PARAM pp;
    ck_assert_dat_ok(p->psp_query_func(psp2, DAT_PSP_FIELD_ALL, &pp));
    ck_assert_uint_eq(pp.conn_qual, aq);
    ck_assert_ptr_eq(pp.evd_handle, s.cr);
    ck_assert_ptr_eq(pp.ia_handle, s.ia);
    ck_assert_int_eq(pp.psp_flags, C);
    ck_assert_dat_ok(p->psp_query_func(psp, DAT_PSP_FIELD_PSP_FLAGS, &pp));
    ck_assert_int_eq(pp.psp_flags, DAT_PSP_PROVIDER_FLAG);
    /* query / free: handles and arguments */
    DAT_CSP_HANDLE csp;
    DAT_COMM tcp4 = {AF_INET, SOCK_STREAM, 0};
    ck_assert_dat_ok(p->csp_create_func(s.ia, &tcp4, NULL, s.cr, &csp));
    ck_assert_dat_ok(p->rsp_create_func(s.ia, free_port(&s), ep, s.cr, &rsp));
    DAT_PSP_HANDLE dead;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &aq, s.cr, C, &dead));
    ck_assert_dat_ok(p->psp_free_func(dead));
    DAT_PSP_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_PSP_HANDLE)junk, (DAT_PSP_HANDLE)rsp, (DAT_PSP_HANDLE)csp,
                            (DAT_PSP_HANDLE)s.cr, dead};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_dat_err(p->psp_query_func(bad[i], DAT_PSP_FIELD_ALL, &pp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_PSP);
        ck_assert_dat_err(p->psp_free_func(bad[i]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
    }
    ck_assert_dat_err(p->psp_query_func(psp, (DAT_PSP_PARAM_MASK)(DAT_PSP_FIELD_ALL + 1), &pp),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->psp_query_func(psp, DAT_PSP_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* Freed: the qualifier is free again; a request meets no listener. */
    ck_assert_dat_ok(p->psp_free_func(psp));
    DAT_EP_HANDLE cep = mk_ep(&o);
    ck_assert_dat_ok(connect_to(&o, cep, q, 0, NULL));
    wait_ev(&o, o.conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    ck_assert_dat_ok(p->psp_create_func(s.ia, q, s.cr, C, &psp));
    ck_assert_dat_ok(p->psp_free_func(psp));
    ck_assert_dat_ok(p->psp_free_func(psp2));
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_dat_ok(p->csp_free_func(csp));
    side_close(&o);
    side_close(&s);
}
END_TEST

START_TEST(rsp_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-sp-rsp", "lo", DAT_FALSE);
    struct side s, o;
    side_open(&s, p);
    side_open(&o, p);
    DAT_IA_HANDLE dead_ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(dead_ia, DAT_CLOSE_ABRUPT_FLAG));
    DAT_CONN_QUAL q = free_port(&s);
    DAT_EP_HANDLE ep = mk_ep(&s), dead_ep = mk_ep(&s);
    ck_assert_dat_ok(p->ep_free_func(dead_ep));
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    DAT_IA_HANDLE bad_ia[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)ep, dead_ia};
    for (size_t i = 0; i < sizeof bad_ia / sizeof bad_ia[0]; i++)
        ck_assert_dat_err(p->rsp_create_func(bad_ia[i], q, ep, s.cr, &rsp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_IA);
    DAT_EP_HANDLE bad_ep[] = {(DAT_EP_HANDLE)junk, (DAT_EP_HANDLE)s.pz, dead_ep, mk_ep(&o)};
    for (size_t i = 0; i < sizeof bad_ep / sizeof bad_ep[0]; i++)
        ck_assert_dat_err(p->rsp_create_func(s.ia, q, bad_ep[i], s.cr, &rsp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EP);
    struct bad_evds be = bad_cr_evds(&s, &o);
    for (size_t i = 0; i < be.n; i++)
        ck_assert_dat_err(p->rsp_create_func(s.ia, q, ep, be.h[i], &rsp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_CR);
    bad_cr_evds_done(&be);
    ck_assert_dat_err(p->rsp_create_func(s.ia, 0, ep, s.cr, &rsp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->rsp_create_func(s.ia, q, ep, s.cr, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    /* The EP must be Unconnected (or its unconfigured twin) (L4456). */
    for (size_t i = 2; i < fx_ep_nstates; i++) {
        fx_force_state(ep, fx_ep_states[i].s);
        ck_assert_dat_err(p->rsp_create_func(s.ia, q, ep, s.cr, &rsp), DAT_INVALID_STATE, fx_ep_states[i].sub);
        ck_assert_int_eq(ep_state(&s, ep), fx_ep_states[i].s);
    }
    fx_force_state(ep, DAT_EP_STATE_UNCONNECTED);
    ck_assert_ptr_null(rsp);
    /* Reserved: a second RSP for it, freeing it, connecting it are refused. */
    ck_assert_dat_ok(p->rsp_create_func(s.ia, q, ep, s.cr, &rsp));
    ck_assert_int_eq(ep_state(&s, ep), DAT_EP_STATE_RESERVED);
    DAT_RSP_HANDLE rsp2 = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->rsp_create_func(s.ia, free_port(&s), ep, s.cr, &rsp2), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_RESERVED);
    ck_assert_dat_err(p->ep_free_func(ep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
    ck_assert_dat_err(connect_to(&s, ep, q, 0, NULL), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
    /* Table 5 on a really reserved EP: EVDs and sizes yes, PZ and the
     * communicator no. */
    DAT_EP_PARAM v;
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &v));
    v.ep_attr.max_request_dtos = 9;
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS,
                                       &v));
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_PZ_HANDLE, &v), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_RESERVED);
    v.comm = (DAT_COMM){AF_INET, SOCK_STREAM, 0};
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_COMM, &v), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
    ck_assert_int_eq(ep_state(&s, ep), DAT_EP_STATE_RESERVED);
    /* Qualifier in use: the EP is not reserved by the failed call. */
    DAT_EP_HANDLE ep2 = mk_ep(&s);
    ck_assert_dat_err(p->rsp_create_func(s.ia, q, ep2, s.cr, &rsp2), DAT_CONN_QUAL_IN_USE, 0);
    ck_assert_int_eq(ep_state(&s, ep2), DAT_EP_STATE_UNCONNECTED);
    /* An unconfigured EP is reserved as UNCONFIGURED_RESERVED. */
    DAT_EP_HANDLE uep;
    ck_assert_dat_ok(p->ep_create_func(s.ia, DAT_HANDLE_NULL, s.dto, s.dto, s.conn, NULL, &uep));
    ck_assert_dat_ok(p->rsp_create_func(s.ia, free_port(&s), uep, s.cr, &rsp2));
    ck_assert_int_eq(ep_state(&s, uep), DAT_EP_STATE_UNCONFIGURED_RESERVED);
    ck_assert_dat_err(p->ep_free_func(uep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFRESERVED);
    ck_assert_dat_ok(p->rsp_free_func(rsp2));
    ck_assert_int_eq(ep_state(&s, uep), DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
    /* query */
    DAT_RSP_PARAM rp;
    ck_assert_dat_ok(p->rsp_query_func(rsp, DAT_RSP_FIELD_ALL, &rp));
    ck_assert_uint_eq(rp.conn_qual, q);
    ck_assert_ptr_eq(rp.ep_handle, ep);
    ck_assert_ptr_eq(rp.evd_handle, s.cr);
    ck_assert_dat_err(p->rsp_query_func(rsp, (DAT_RSP_PARAM_MASK)(DAT_RSP_FIELD_ALL + 1), &rp),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->rsp_query_func(rsp, DAT_RSP_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    DAT_CONN_QUAL pq;
    DAT_PSP_HANDLE psp = mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &pq);
    DAT_RSP_HANDLE dead_rsp;
    ck_assert_dat_ok(p->rsp_create_func(s.ia, free_port(&s), ep2, s.cr, &dead_rsp));
    ck_assert_dat_ok(p->rsp_free_func(dead_rsp));
    DAT_RSP_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_RSP_HANDLE)junk, (DAT_RSP_HANDLE)psp, (DAT_RSP_HANDLE)ep,
                            dead_rsp};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_dat_err(p->rsp_query_func(bad[i], DAT_RSP_FIELD_ALL, &rp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_RSP);
        ck_assert_dat_err(p->rsp_free_func(bad[i]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
    }
    /* free returns the EP to the consumer (L4505). */
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_int_eq(ep_state(&s, ep), DAT_EP_STATE_UNCONNECTED);
    /* A NULL EP: the provider's, unconfigured, gone with the RSP (L4439). */
    ck_assert_dat_ok(p->rsp_create_func(s.ia, q, DAT_HANDLE_NULL, s.cr, &rsp));
    ck_assert_dat_ok(p->rsp_query_func(rsp, DAT_RSP_FIELD_EP_HANDLE, &rp));
    DAT_EP_HANDLE pep = rp.ep_handle;
    ck_assert_ptr_nonnull(pep);
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_UNCONFIGURED_RESERVED);
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    DAT_EP_STATE st;
    ck_assert_dat_err(p->ep_get_status_func(pep, &st, NULL, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    ck_assert_dat_ok(p->psp_free_func(psp));
    side_close(&o);
    side_close(&s);
}
END_TEST

START_TEST(csp_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-sp-csp", "lo", DAT_FALSE);
    struct side s, o;
    side_open(&s, p);
    side_open(&o, p);
    DAT_IA_HANDLE dead_ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(dead_ia, DAT_CLOSE_ABRUPT_FLAG));
    DAT_COMM tcp4 = {AF_INET, SOCK_STREAM, 0};
    unsigned port = (unsigned)free_port(&s);
    struct sockaddr_in a = v4("127.0.0.1", port);
    DAT_IA_ADDRESS_PTR ap = (DAT_IA_ADDRESS_PTR)&a;
    DAT_CSP_HANDLE csp = DAT_HANDLE_NULL;
    DAT_IA_HANDLE bad_ia[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)s.cr, dead_ia};
    for (size_t i = 0; i < sizeof bad_ia / sizeof bad_ia[0]; i++)
        ck_assert_dat_err(p->csp_create_func(bad_ia[i], &tcp4, ap, s.cr, &csp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_IA);
    struct bad_evds be = bad_cr_evds(&s, &o);
    for (size_t i = 0; i < be.n; i++)
        ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, be.h[i], &csp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_CR);
    bad_cr_evds_done(&be);
    ck_assert_dat_err(p->csp_create_func(s.ia, NULL, ap, s.cr, &csp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_COMM dgram = {AF_INET, SOCK_DGRAM, 0};
    ck_assert_dat_err(p->csp_create_func(s.ia, &dgram, ap, s.cr, &csp), DAT_COMM_NOT_SUPPORTED, 0);
    struct sockaddr_in other = v4("127.0.0.2", port);
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, (DAT_IA_ADDRESS_PTR)&other, s.cr, &csp),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, s.cr, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_ptr_null(csp);
    ck_assert_dat_ok(p->csp_create_func(s.ia, &tcp4, ap, s.cr, &csp));
    DAT_CSP_HANDLE csp2 = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, s.cr, &csp2), DAT_PORT_IN_USE, 0);
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->psp_create_func(s.ia, port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_CONN_QUAL_IN_USE, 0);
    DAT_CSP_PARAM cp;
    ck_assert_dat_ok(p->csp_query_func(csp, DAT_CSP_FIELD_ALL, &cp));
    ck_assert_int_eq(ntohs(((struct sockaddr_in *)cp.address_ptr)->sin_port), port);
    ck_assert_ptr_eq(cp.evd_handle, s.cr);
    ck_assert_dat_err(p->csp_query_func(csp, (DAT_CSP_PARAM_MASK)(DAT_CSP_FIELD_ALL + 1), &cp),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->csp_query_func(csp, DAT_CSP_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    DAT_CSP_HANDLE dead;
    ck_assert_dat_ok(p->csp_create_func(s.ia, &tcp4, NULL, s.cr, &dead));
    ck_assert_dat_ok(p->csp_free_func(dead));
    DAT_CONN_QUAL pq;
    psp = mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &pq);
    DAT_CSP_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_CSP_HANDLE)junk, (DAT_CSP_HANDLE)psp, (DAT_CSP_HANDLE)s.ia, dead};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_dat_err(p->csp_query_func(bad[i], DAT_CSP_FIELD_ALL, &cp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_CSP);
        ck_assert_dat_err(p->csp_free_func(bad[i]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);
    }
    ck_assert_dat_ok(p->csp_free_func(csp));
    ck_assert_dat_ok(p->csp_create_func(s.ia, &tcp4, ap, s.cr, &csp)); /* port free again */
    ck_assert_dat_ok(p->csp_free_func(csp));
    ck_assert_dat_ok(p->psp_free_func(psp));
    side_close(&o);
    side_close(&s);
}
END_TEST

/* SD_MAX_SPS per IA, on an address nobody else in the tree uses. */
START_TEST(psp_beyond_max_sps)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < SD_MAX_SPS + 256) {
        rlim_t want = SD_MAX_SPS + 256;
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
            return; /* cannot have that many listeners here */
        rl.rlim_cur = want;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    DAT_PROVIDER *p = fx_provider("t-rc-sp-max", "127.0.83.1", DAT_FALSE);
    struct side s;
    side_open(&s, p);
    DAT_PSP_HANDLE *psp = calloc(SD_MAX_SPS, sizeof *psp);
    const unsigned base = 40000;
    for (unsigned i = 0; i < SD_MAX_SPS; i++)
        ck_assert_dat_ok(p->psp_create_func(s.ia, base + i, s.cr, DAT_PSP_CONSUMER_FLAG, &psp[i]));
    DAT_PSP_HANDLE extra = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->psp_create_func(s.ia, base + SD_MAX_SPS, s.cr, DAT_PSP_CONSUMER_FLAG, &extra),
                      DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    DAT_CONN_QUAL q;
    ck_assert_dat_err(p->psp_create_any_func(s.ia, &q, s.cr, DAT_PSP_CONSUMER_FLAG, &extra),
                      DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ck_assert_ptr_null(extra);
    /* The refused creates left the port unbound. */
    ck_assert_dat_ok(p->psp_free_func(psp[7]));
    ck_assert_dat_ok(p->psp_create_func(s.ia, base + SD_MAX_SPS, s.cr, DAT_PSP_CONSUMER_FLAG, &psp[7]));
    ck_assert_dat_err(p->psp_create_func(s.ia, base + 7, s.cr, DAT_PSP_CONSUMER_FLAG, &extra),
                      DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    for (unsigned i = 0; i < SD_MAX_SPS; i++)
        ck_assert_dat_ok(p->psp_free_func(psp[i]));
    free(psp);
    side_close(&s);
}
END_TEST

/* Every port of the create_any range taken on ::1 (an address the rest of
 * the unit tests do not listen on): DAT_CONN_QUAL_UNAVAILABLE (L4143).
 * The ports are held by listening sockets for a fraction of a second. */
START_TEST(psp_create_any_unavailable)
{
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    if (probe < 0 || bind(probe, (struct sockaddr *)&a6, sizeof a6) != 0) {
        if (probe >= 0)
            close(probe);
        return; /* no IPv6 loopback on this host */
    }
    close(probe);
    const unsigned n = 32767 - 20000 + 1;
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < n + 256) {
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < n + 256)
            return;
        rl.rlim_cur = n + 256;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    DAT_PROVIDER *p = fx_provider("t-rc-sp-any6", "::1", DAT_FALSE);
    struct side s;
    side_open(&s, p);
    int *fds = calloc(n, sizeof *fds);
    for (unsigned i = 0; i < n; i++) {
        fds[i] = socket(AF_INET6, SOCK_STREAM, 0);
        ck_assert_int_ge(fds[i], 0);
        /* Listening (a listener conflicts with every later bind); with
         * SO_REUSEADDR so a port in TIME_WAIT is taken too. */
        int one = 1;
        setsockopt(fds[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        a6.sin6_port = htons((uint16_t)(20000 + i));
        if (bind(fds[i], (struct sockaddr *)&a6, sizeof a6) != 0 || listen(fds[i], 1) != 0) {
            ck_assert_int_eq(errno, EADDRINUSE); /* someone else listens there: taken all the same */
            close(fds[i]);
            fds[i] = -1;
        }
    }
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_RETURN rc = p->psp_create_any_func(s.ia, &q, s.cr, DAT_PSP_CONSUMER_FLAG, &psp);
    for (unsigned i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    ck_assert_dat_err(rc, DAT_CONN_QUAL_UNAVAILABLE, 0);
    ck_assert_ptr_null(psp);
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &q, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    ck_assert_dat_ok(p->psp_free_func(psp));
    side_close(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_sp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, psp_errors);
    tcase_add_test(tc, rsp_errors);
    tcase_add_test(tc, csp_errors);
    tcase_add_test(tc, psp_beyond_max_sps);
    tcase_add_test(tc, psp_create_any_unavailable);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
