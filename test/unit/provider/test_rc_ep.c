/* Return codes of the EP object calls that do not move a connection:
 * dat_ep_create, dat_ep_create_with_srq (arguments), dat_ep_free,
 * dat_ep_query, dat_ep_modify (Table 5: every field in every state),
 * dat_ep_get_status, dat_ep_recv_query, dat_ep_set_watermark and
 * dat_ep_reset (L5523-7052). States a connection would produce are set
 * directly on the object for the decision tables (the flows that reach
 * them are in test_rc_cm.c / test_cm.c); everything else goes through the
 * provider table. docs/compliance-notes-ep.md lists what each test covers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "lib/provider/ep.h"
#include "lib/provider/limits.h"
#include "test/lib/prov_fixture.h"

static _Alignas(64) char junk[256];

struct fx {
    DAT_PROVIDER *p;
    DAT_IA_HANDLE ia, ia2, dead_ia;
    DAT_PZ_HANDLE pz, pz2, pz_ia2, pz_dead;
    DAT_EVD_HANDLE dto, conn, cr, bind, dto_ia2, conn_ia2, evd_dead;
    /* Another IA (another dat.conf name): its EVDs are foreign. ia2 is
     * another open instance of the same IA, whose EVDs may be shared. */
    DAT_PROVIDER *po;
    DAT_IA_HANDLE ia_o;
    DAT_EVD_HANDLE dto_o, conn_o;
};

static void fx_setup(struct fx *f, const char *name)
{
    memset(f, 0, sizeof *f);
    f->p = fx_provider(name, "lo", DAT_FALSE);
    DAT_PROVIDER *p = f->p;
    f->ia = fx_open(p, NULL);
    f->ia2 = fx_open(p, NULL);
    f->dead_ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(f->dead_ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(p->pz_create_func(f->ia, &f->pz));
    ck_assert_dat_ok(p->pz_create_func(f->ia, &f->pz2));
    ck_assert_dat_ok(p->pz_create_func(f->ia2, &f->pz_ia2));
    ck_assert_dat_ok(p->pz_create_func(f->ia, &f->pz_dead));
    ck_assert_dat_ok(p->pz_free_func(f->pz_dead));
    ck_assert_dat_ok(p->evd_create_func(f->ia, 64, NULL, DAT_EVD_DTO_FLAG, &f->dto));
    ck_assert_dat_ok(p->evd_create_func(f->ia, 16, NULL, DAT_EVD_CONNECTION_FLAG, &f->conn));
    ck_assert_dat_ok(p->evd_create_func(f->ia, 16, NULL, DAT_EVD_CR_FLAG, &f->cr));
    ck_assert_dat_ok(p->evd_create_func(f->ia, 16, NULL, DAT_EVD_RMR_BIND_FLAG, &f->bind));
    ck_assert_dat_ok(p->evd_create_func(f->ia2, 16, NULL, DAT_EVD_DTO_FLAG, &f->dto_ia2));
    ck_assert_dat_ok(p->evd_create_func(f->ia2, 16, NULL, DAT_EVD_CONNECTION_FLAG, &f->conn_ia2));
    ck_assert_dat_ok(p->evd_create_func(f->ia, 16, NULL, DAT_EVD_DTO_FLAG, &f->evd_dead));
    ck_assert_dat_ok(p->evd_free_func(f->evd_dead));
    f->po = fx_provider("t-rc-ep-other", "lo", DAT_FALSE);
    f->ia_o = fx_open(f->po, NULL);
    ck_assert_dat_ok(f->po->evd_create_func(f->ia_o, 16, NULL, DAT_EVD_DTO_FLAG, &f->dto_o));
    ck_assert_dat_ok(f->po->evd_create_func(f->ia_o, 16, NULL, DAT_EVD_CONNECTION_FLAG, &f->conn_o));
}

static void fx_teardown(struct fx *f)
{
    ck_assert_dat_ok(f->p->ia_close_func(f->ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(f->p->ia_close_func(f->ia2, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(f->po->ia_close_func(f->ia_o, DAT_CLOSE_ABRUPT_FLAG));
}

static DAT_EP_HANDLE mk_ep(struct fx *f)
{
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ck_assert_dat_ok(f->p->ep_create_func(f->ia, f->pz, f->dto, f->dto, f->conn, NULL, &ep));
    return ep;
}

static DAT_EP_STATE get_state(struct fx *f, DAT_EP_HANDLE ep)
{
    DAT_EP_STATE s;
    ck_assert_dat_ok(f->p->ep_get_status_func(ep, &s, NULL, NULL));
    return s;
}


static bool st_unconf(DAT_EP_STATE s)
{
    return s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED || s == DAT_EP_STATE_UNCONFIGURED_RESERVED ||
           s == DAT_EP_STATE_UNCONFIGURED_PASSIVE || s == DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
}

static bool st_pre(DAT_EP_STATE s)
{
    return st_unconf(s) || s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_RESERVED ||
           s == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING || s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
}

/* ------------------------------------------------------------------ create */

START_TEST(create_bad_handles)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-ch");
    DAT_PROVIDER *p = f.p;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_IA_HANDLE bad_ia[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)f.pz, f.dead_ia};
    for (size_t i = 0; i < sizeof bad_ia / sizeof bad_ia[0]; i++)
        ck_assert_dat_err(p->ep_create_func(bad_ia[i], f.pz, f.dto, f.dto, f.conn, NULL, &ep), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_IA);
    DAT_PZ_HANDLE bad_pz[] = {(DAT_PZ_HANDLE)junk, (DAT_PZ_HANDLE)f.dto, f.pz_dead, f.pz_ia2};
    for (size_t i = 0; i < sizeof bad_pz / sizeof bad_pz[0]; i++)
        ck_assert_dat_err(p->ep_create_func(f.ia, bad_pz[i], f.dto, f.dto, f.conn, NULL, &ep), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_PZ);
    /* EVDs: garbage, another type, freed, another IA's, without the stream */
    DAT_EVD_HANDLE bad_rv[] = {(DAT_EVD_HANDLE)junk, (DAT_EVD_HANDLE)f.pz, f.evd_dead, f.dto_o, f.conn, f.bind};
    for (size_t i = 0; i < sizeof bad_rv / sizeof bad_rv[0]; i++)
        ck_assert_dat_err(p->ep_create_func(f.ia, f.pz, bad_rv[i], f.dto, f.conn, NULL, &ep), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_RECV);
    DAT_EVD_HANDLE bad_rq[] = {(DAT_EVD_HANDLE)junk, (DAT_EVD_HANDLE)f.pz, f.evd_dead, f.dto_o, f.conn, f.cr};
    for (size_t i = 0; i < sizeof bad_rq / sizeof bad_rq[0]; i++)
        ck_assert_dat_err(p->ep_create_func(f.ia, f.pz, f.dto, bad_rq[i], f.conn, NULL, &ep), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_REQUEST);
    DAT_EVD_HANDLE bad_cn[] = {(DAT_EVD_HANDLE)junk, (DAT_EVD_HANDLE)f.pz, f.evd_dead, f.conn_o, f.dto, f.cr};
    for (size_t i = 0; i < sizeof bad_cn / sizeof bad_cn[0]; i++)
        ck_assert_dat_err(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, bad_cn[i], NULL, &ep), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_CONN);
    ck_assert_ptr_null(ep);
    /* The failures took nothing: the EVDs and PZs are free to go. */
    ck_assert_dat_ok(p->evd_free_func(f.conn));
    ck_assert_dat_ok(p->pz_free_func(f.pz2));
    /* An RMR_BIND-only EVD is a request EVD (binds complete there). */
    ck_assert_dat_ok(p->ep_create_func(f.ia, f.pz, f.dto, f.bind, DAT_HANDLE_NULL, NULL, &ep));
    ck_assert_int_eq(get_state(&f, ep), DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
    ck_assert_dat_ok(p->ep_free_func(ep));
    fx_teardown(&f);
}
END_TEST

START_TEST(create_bad_parameters)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-cp");
    DAT_PROVIDER *p = f.p;
    DAT_IA_ATTR ia;
    ck_assert_dat_ok(p->ia_query_func(f.ia, NULL, DAT_IA_FIELD_ALL, &ia, 0, NULL));
    DAT_EP_ATTR base;
    sd_ep_default_attr(&base);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, f.conn, NULL, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG7);
    ck_assert_dat_err(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, f.conn, &base, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG7);
    /* Each attribute one past what dat_ia_query reports, or meaningless. */
    static DAT_NAMED_ATTR na = {"x", "y"};
    for (int k = 0;; k++) {
        DAT_EP_ATTR a = base;
        switch (k) {
        case 0: a.service_type = (DAT_SERVICE_TYPE)0x7777; break;
        case 1: a.max_message_size = (DAT_VLEN)ia.max_message_size + 1; break;
        case 2: a.max_rdma_size = (DAT_VLEN)ia.max_rdma_size + 1; break;
        case 3: a.qos = (DAT_QOS)0x100; break;
        case 4: a.recv_completion_flags = (DAT_COMPLETION_FLAGS)0x80; break;
        case 5: a.request_completion_flags = (DAT_COMPLETION_FLAGS)0x80; break;
        case 6: a.max_recv_dtos = ia.max_dto_per_ep + 1; break;
        case 7: a.max_recv_dtos = -1; break;
        case 8: a.max_request_dtos = ia.max_dto_per_ep + 1; break;
        case 9: a.max_request_dtos = -1; break;
        case 10: a.max_recv_iov = ia.max_iov_segments_per_dto + 1; break;
        case 11: a.max_request_iov = ia.max_iov_segments_per_dto + 1; break;
        case 12: a.max_rdma_read_in = ia.max_rdma_read_per_ep_in + 1; break;
        case 13: a.max_rdma_read_out = ia.max_rdma_read_per_ep_out + 1; break;
        case 14: a.max_rdma_read_iov = ia.max_iov_segments_per_rdma_read + 1; break;
        case 15: a.max_rdma_write_iov = ia.max_iov_segments_per_rdma_write + 1; break;
        case 16: a.ep_transport_specific_count = -1; break;
        case 17: a.ep_transport_specific_count = 1; a.ep_transport_specific = NULL; break;
        case 18: a.ep_provider_specific_count = -1; break;
        case 19: a.ep_provider_specific_count = 1; a.ep_provider_specific = NULL; break;
        case 20: a.max_rdma_read_in = -1; break;
        case 21: a.max_recv_iov = -1; break;
        default: goto done;
        }
        ck_assert_msg(DAT_GET_TYPE(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, f.conn, &a, &ep)) ==
                          DAT_INVALID_PARAMETER,
                      "case %d accepted", k);
        ck_assert_dat_err(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, f.conn, &a, &ep), DAT_INVALID_PARAMETER,
                          DAT_INVALID_ARG6);
    }
done:
    ck_assert_ptr_null(ep);
    /* IB UD (the extension service type) makes a UD EP (test_rc_ud). */
    DAT_EP_ATTR ud = base;
    ud.service_type = DAT_SERVICE_TYPE_EXTENSION_BASE;
    ck_assert_dat_ok(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, f.conn, &ud, &ep));
    ck_assert_dat_ok(p->ep_free_func(ep));
    ep = DAT_HANDLE_NULL;
    /* Exactly the reported limits are accepted, and query shows them. */
    DAT_EP_ATTR max = base;
    max.max_message_size = ia.max_message_size;
    max.max_rdma_size = ia.max_rdma_size;
    max.max_recv_dtos = ia.max_dto_per_ep;
    max.max_request_dtos = ia.max_dto_per_ep;
    max.max_recv_iov = ia.max_iov_segments_per_dto;
    max.max_request_iov = ia.max_iov_segments_per_dto;
    max.max_rdma_read_in = ia.max_rdma_read_per_ep_in;
    max.max_rdma_read_out = ia.max_rdma_read_per_ep_out;
    max.max_rdma_read_iov = ia.max_iov_segments_per_rdma_read;
    max.max_rdma_write_iov = ia.max_iov_segments_per_rdma_write;
    max.ep_provider_specific_count = 1; /* named attributes we do not know are ignored */
    max.ep_provider_specific = &na;
    ck_assert_dat_ok(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, f.conn, &max, &ep));
    DAT_EP_PARAM q;
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &q));
    ck_assert_int_eq(q.ep_attr.max_recv_dtos, ia.max_dto_per_ep);
    ck_assert_int_eq(q.ep_attr.max_rdma_read_out, ia.max_rdma_read_per_ep_out);
    ck_assert_uint_eq(q.ep_attr.max_message_size, ia.max_message_size);
    ck_assert_dat_ok(p->ep_free_func(ep));
    fx_teardown(&f);
}
END_TEST

START_TEST(create_beyond_max_eps)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-max");
    DAT_PROVIDER *p = f.p;
    DAT_IA_ATTR a;
    ck_assert_dat_ok(p->ia_query_func(f.ia, NULL, DAT_IA_FIELD_IA_MAX_EPS, &a, 0, NULL));
    ck_assert_int_eq(a.max_eps, SD_MAX_EPS);
    DAT_EP_HANDLE *eps = calloc((size_t)a.max_eps, sizeof *eps);
    /* Unconfigured EPs have no QP yet: cheap, and they count all the same. */
    for (DAT_COUNT i = 0; i < a.max_eps; i++)
        ck_assert_dat_ok(p->ep_create_func(f.ia, NULL, NULL, NULL, NULL, NULL, &eps[i]));
    DAT_EP_HANDLE extra = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, f.conn, NULL, &extra), DAT_INSUFFICIENT_RESOURCES,
                      DAT_RESOURCE_TEP);
    ck_assert_ptr_null(extra);
    /* The provider's own EPs count too: an RSP asking for one fails. */
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->rsp_create_func(f.ia, 45123, DAT_HANDLE_NULL, f.cr, &rsp), DAT_INSUFFICIENT_RESOURCES,
                      DAT_RESOURCE_TEP);
    ck_assert_ptr_null(rsp);
    /* Per IA. */
    DAT_PZ_HANDLE pz2;
    ck_assert_dat_ok(p->pz_create_func(f.ia2, &pz2));
    ck_assert_dat_ok(p->ep_create_func(f.ia2, pz2, f.dto_ia2, f.dto_ia2, f.conn_ia2, NULL, &extra));
    ck_assert_dat_ok(p->ep_free_func(extra));
    /* A freed slot is available again, then the limit holds again. */
    ck_assert_dat_ok(p->ep_free_func(eps[100]));
    ck_assert_dat_ok(p->ep_create_func(f.ia, f.pz, f.dto, f.dto, f.conn, NULL, &eps[100]));
    ck_assert_dat_err(p->ep_create_func(f.ia, NULL, NULL, NULL, NULL, NULL, &extra), DAT_INSUFFICIENT_RESOURCES,
                      DAT_RESOURCE_TEP);
    for (DAT_COUNT i = 0; i < a.max_eps; i++)
        ck_assert_dat_ok(p->ep_free_func(eps[i]));
    free(eps);
    fx_teardown(&f);
}
END_TEST

START_TEST(create_with_srq_arguments)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-srq");
    DAT_PROVIDER *p = f.p;
    DAT_SRQ_ATTR sa = {.max_recv_dtos = 16, .max_recv_iov = 1, .low_watermark = DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq, srq_ia2, srq_dead;
    ck_assert_dat_ok(p->srq_create_func(f.ia, f.pz, &sa, &srq));
    ck_assert_dat_ok(p->srq_create_func(f.ia2, f.pz_ia2, &sa, &srq_ia2));
    ck_assert_dat_ok(p->srq_create_func(f.ia, f.pz, &sa, &srq_dead));
    ck_assert_dat_ok(p->srq_free_func(srq_dead));
    DAT_EP_ATTR a;
    sd_ep_default_attr(&a);
    a.max_recv_dtos = DAT_HW_DEFAULT;
    a.srq_soft_hw = DAT_HW_DEFAULT;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_IA_HANDLE bad_ia[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)srq, f.dead_ia};
    for (size_t i = 0; i < sizeof bad_ia / sizeof bad_ia[0]; i++)
        ck_assert_dat_err(p->ep_create_with_srq_func(bad_ia[i], f.pz, f.dto, f.dto, f.conn, srq, &a, &ep),
                          DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    DAT_SRQ_HANDLE bad_srq[] = {DAT_HANDLE_NULL, (DAT_SRQ_HANDLE)junk, (DAT_SRQ_HANDLE)f.pz, srq_dead, srq_ia2};
    for (size_t i = 0; i < sizeof bad_srq / sizeof bad_srq[0]; i++)
        ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.conn, bad_srq[i], &a, &ep),
                          DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz_ia2, f.dto, f.dto, f.conn, srq, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.conn, f.dto, f.conn, srq, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.cr, f.conn, srq, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.dto, srq, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
    /* ep_attributes is required with an SRQ (L5712). */
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.conn, srq, NULL, &ep),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.conn, srq, &a, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    DAT_EP_ATTR b = a;
    b.max_request_dtos = SD_MAX_DTO_PER_EP + 1;
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.conn, srq, &b, &ep),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    b = a;
    b.srq_soft_hw = -5;
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.conn, srq, &b, &ep),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    b = a;
    b.max_recv_dtos = -5;
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.conn, srq, &b, &ep),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    b = a;
    b.service_type = DAT_SERVICE_TYPE_EXTENSION_BASE;
    ck_assert_dat_err(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.conn, srq, &b, &ep),
                      DAT_MODEL_NOT_SUPPORTED, 0);
    ck_assert_ptr_null(ep);
    /* max_recv_iov is ignored with an SRQ (L5766) and reads back 0. */
    b = a;
    b.max_recv_iov = SD_MAX_IOV_PER_DTO + 100;
    ck_assert_dat_ok(p->ep_create_with_srq_func(f.ia, f.pz, NULL, f.dto, f.conn, srq, &b, &ep));
    DAT_EP_PARAM q;
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &q));
    ck_assert_ptr_eq(q.srq_handle, srq);
    ck_assert_int_eq(q.ep_attr.max_recv_iov, 0);
    ck_assert_int_eq(q.ep_state, DAT_EP_STATE_UNCONNECTED);
    ck_assert_dat_ok(p->ep_free_func(ep));
    ck_assert_dat_ok(p->srq_free_func(srq));
    fx_teardown(&f);
}
END_TEST

/* ------------------------------------------- every call with a bad EP handle */

START_TEST(bad_ep_handles)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-bh");
    DAT_PROVIDER *p = f.p;
    DAT_EP_HANDLE good = mk_ep(&f), dead = mk_ep(&f);
    ck_assert_dat_ok(p->ep_free_func(dead));
    DAT_EP_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_EP_HANDLE)junk, (DAT_EP_HANDLE)f.pz, (DAT_EP_HANDLE)f.ia,
                           (DAT_EP_HANDLE)f.conn, dead};
    DAT_EP_PARAM q;
    DAT_EP_STATE st;
    DAT_COUNT n;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(45000), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        DAT_EP_HANDLE b = bad[i];
        const DAT_UINT32 E = DAT_INVALID_HANDLE_EP;
        ck_assert_dat_err(p->ep_free_func(b), DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_query_func(b, DAT_EP_FIELD_ALL, &q), DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_modify_func(b, DAT_EP_FIELD_EP_ATTR_QOS, &q), DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_get_status_func(b, &st, NULL, NULL), DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_recv_query_func(b, &n, &n), DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_set_watermark_func(b, DAT_WATERMARK_INFINITE, DAT_WATERMARK_INFINITE),
                          DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_reset_func(b), DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_connect_func(b, (DAT_IA_ADDRESS_PTR)&a, 45000, 1000000, 0, NULL,
                                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                          DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_common_connect_func(b, (DAT_IA_ADDRESS_PTR)&a, 1000000, 0, NULL),
                          DAT_INVALID_HANDLE, E);
        ck_assert_dat_err(p->ep_dup_connect_func(b, good, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT), DAT_INVALID_HANDLE,
                          E);
        ck_assert_dat_err(p->ep_dup_connect_func(good, b, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT), DAT_INVALID_HANDLE,
                          E);
        ck_assert_dat_err(p->ep_disconnect_func(b, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE, E);
    }
    /* None of it touched the good EP. */
    ck_assert_int_eq(get_state(&f, good), DAT_EP_STATE_UNCONNECTED);
    ck_assert_dat_ok(p->ep_free_func(good));
    fx_teardown(&f);
}
END_TEST

/* ------------------------------------------ query, get_status, recv_query */

START_TEST(query_status_recv_query)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-q");
    DAT_PROVIDER *p = f.p;
    DAT_EP_HANDLE ep = mk_ep(&f);
    DAT_EP_PARAM q;
    ck_assert_dat_err(p->ep_query_func(ep, DAT_EP_FIELD_ALL + 1, &q), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_query_func(ep, UINT64_C(1) << 40, &q), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_query_func(ep, DAT_EP_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    memset(&q, 0xa5, sizeof q);
    ck_assert_dat_ok(p->ep_query_func(ep, 0, &q)); /* an empty mask asks for nothing, and is valid */
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &q));
    ck_assert_int_eq(q.comm.domain, 0); /* no communicator yet */
    ck_assert_ptr_null(q.srq_handle);
    ck_assert_int_eq(q.ep_attr.srq_soft_hw, DAT_HW_DEFAULT);
    ck_assert_int_eq(q.remote_port_qual, 0);

    /* get_status: every out pointer optional; idle with nothing posted. */
    DAT_EP_STATE st = (DAT_EP_STATE)-1;
    DAT_BOOLEAN ri = DAT_FALSE, qi = DAT_FALSE;
    ck_assert_dat_ok(p->ep_get_status_func(ep, NULL, NULL, NULL));
    ck_assert_dat_ok(p->ep_get_status_func(ep, &st, &ri, &qi));
    ck_assert_int_eq(st, DAT_EP_STATE_UNCONNECTED);
    ck_assert_int_eq(ri, DAT_TRUE);
    ck_assert_int_eq(qi, DAT_TRUE);
    /* A posted receive: recv not idle; recv_query counts it (span == n). */
    static char buf[64];
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT ctx;
    ck_assert_dat_ok(p->lmr_create_func(f.ia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){.for_va = buf},
                                        sizeof buf, f.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &ctx, NULL,
                                        NULL, NULL));
    DAT_LMR_TRIPLET iov = {.lmr_context = ctx, .virtual_address = (DAT_VADDR)(uintptr_t)buf,
                           .segment_length = sizeof buf};
    DAT_COUNT nb = -5, span = -5;
    ck_assert_dat_ok(p->ep_recv_query_func(ep, NULL, NULL));
    ck_assert_dat_ok(p->ep_recv_query_func(ep, &nb, &span));
    ck_assert_int_eq(nb, 0);
    ck_assert_int_eq(span, 0);
    ck_assert_dat_ok(p->ep_post_recv_func(ep, 1, &iov, (DAT_DTO_COOKIE){.as_64 = 7}, DAT_COMPLETION_DEFAULT_FLAG));
    ck_assert_dat_ok(p->ep_get_status_func(ep, NULL, &ri, &qi));
    ck_assert_int_eq(ri, DAT_FALSE);
    ck_assert_int_eq(qi, DAT_TRUE);
    ck_assert_dat_ok(p->ep_recv_query_func(ep, &nb, NULL));
    ck_assert_int_eq(nb, 1);
    ck_assert_dat_ok(p->ep_recv_query_func(ep, NULL, &span));
    ck_assert_int_eq(span, 1);
    /* Allowed in every state (L5957): state reported as set. */
    for (size_t i = 0; i < fx_ep_nstates; i++) {
        fx_force_state(ep, fx_ep_states[i].s);
        ck_assert_dat_ok(p->ep_get_status_func(ep, &st, NULL, NULL));
        ck_assert_int_eq(st, fx_ep_states[i].s);
        ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_EP_STATE, &q));
        ck_assert_int_eq(q.ep_state, fx_ep_states[i].s);
        ck_assert_dat_ok(p->ep_recv_query_func(ep, &nb, &span));
    }
    fx_force_state(ep, DAT_EP_STATE_UNCONNECTED);
    ck_assert_dat_ok(p->ep_free_func(ep));
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    fx_teardown(&f);
}
END_TEST

START_TEST(set_watermark_codes)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-wm");
    DAT_PROVIDER *p = f.p;
    DAT_EP_HANDLE ep = mk_ep(&f);
    const DAT_COUNT INF = DAT_WATERMARK_INFINITE;
    ck_assert_dat_err(p->ep_set_watermark_func(ep, -2, INF), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_set_watermark_func(ep, INF, -2), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* High watermarks are not supported (srq_watermarks_supported): finite values. */
    ck_assert_dat_err(p->ep_set_watermark_func(ep, 4, INF), DAT_MODEL_NOT_SUPPORTED, 0);
    ck_assert_dat_err(p->ep_set_watermark_func(ep, INF, 0), DAT_MODEL_NOT_SUPPORTED, 0);
    /* Valid in every state (L6415). */
    for (size_t i = 0; i < fx_ep_nstates; i++) {
        fx_force_state(ep, fx_ep_states[i].s);
        ck_assert_dat_ok(p->ep_set_watermark_func(ep, INF, INF));
        ck_assert_dat_err(p->ep_set_watermark_func(ep, 1, 1), DAT_MODEL_NOT_SUPPORTED, 0);
    }
    fx_force_state(ep, DAT_EP_STATE_UNCONNECTED);
    ck_assert_dat_ok(p->ep_free_func(ep));
    fx_teardown(&f);
}
END_TEST

/* ------------------------------------------------------- free and reset */

START_TEST(free_and_reset_every_state)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-fr");
    DAT_PROVIDER *p = f.p;
    for (size_t i = 0; i < fx_ep_nstates; i++) {
        DAT_EP_STATE s = fx_ep_states[i].s;
        DAT_EP_HANDLE ep = mk_ep(&f);
        fx_force_state(ep, s);
        /* reset: Unconnected (no-op) and Disconnected only (L7040-7052). */
        DAT_RETURN rr = p->ep_reset_func(ep);
        if (s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_DISCONNECTED) {
            ck_assert_dat_ok(rr);
            ck_assert_int_eq(get_state(&f, ep), DAT_EP_STATE_UNCONNECTED);
            fx_force_state(ep, s);
        } else {
            ck_assert_dat_err(rr, DAT_INVALID_STATE, fx_ep_states[i].sub);
            ck_assert_int_eq(get_state(&f, ep), s);
        }
        /* free: not while an RSP or a CR holds it (L6011, L5457). */
        bool held = s == DAT_EP_STATE_RESERVED || s == DAT_EP_STATE_UNCONFIGURED_RESERVED ||
                    s == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING || s == DAT_EP_STATE_UNCONFIGURED_PASSIVE ||
                    s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING || s == DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
        DAT_RETURN rf = p->ep_free_func(ep);
        if (held) {
            ck_assert_dat_err(rf, DAT_INVALID_STATE, fx_ep_states[i].sub);
            ck_assert_int_eq(get_state(&f, ep), s);
            fx_force_state(ep, DAT_EP_STATE_UNCONNECTED);
            ck_assert_dat_ok(p->ep_free_func(ep));
        } else {
            ck_assert_dat_ok(rf);
        }
        ck_assert_dat_err(p->ep_free_func(ep), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    }
    /* A really unconfigured EP: free yes, reset no. */
    DAT_EP_HANDLE u;
    ck_assert_dat_ok(p->ep_create_func(f.ia, NULL, f.dto, f.dto, f.conn, NULL, &u));
    ck_assert_dat_err(p->ep_reset_func(u), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED);
    ck_assert_dat_ok(p->ep_free_func(u));
    fx_teardown(&f);
}
END_TEST

/* ------------------------------------------------------------- modify */

/* Table 5, per mask bit: 0 never (INVALID_PARAMETER|ARG2), else the states. */
enum rule { NEVER, UNUSED, PZ_RULE, QUIESCENT, PRE };

static enum rule rule_of(DAT_EP_PARAM_MASK bit)
{
    switch (bit) {
    case DAT_EP_FIELD_IA_HANDLE:
    case DAT_EP_FIELD_EP_STATE:
    case DAT_EP_FIELD_LOCAL_PORT_QUAL:
    case DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR:
    case DAT_EP_FIELD_REMOTE_PORT_QUAL:
    case DAT_EP_FIELD_SRQ_HANDLE:
    case DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW: return NEVER;
    case DAT_EP_FIELD_COMM:
    case DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR: return UNUSED;
    case DAT_EP_FIELD_PZ_HANDLE: return PZ_RULE;
    case DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR:
    case DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR:
    case DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR:
    case DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR: return QUIESCENT;
    default: return PRE;
    }
}

static bool rule_allows(enum rule r, DAT_EP_STATE s)
{
    switch (r) {
    case NEVER: return false;
    case UNUSED: return s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED;
    case PZ_RULE: return st_unconf(s) || s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
    case QUIESCENT: return st_unconf(s) || s == DAT_EP_STATE_UNCONNECTED;
    case PRE: return st_pre(s);
    }
    return false;
}

START_TEST(modify_every_field_every_state)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-mt");
    DAT_PROVIDER *p = f.p;
    DAT_EP_HANDLE ep = mk_ep(&f);
    DAT_EP_PARAM v;
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &v));
    /* Valid values for every field: the EP's own, a TCP communicator, the
     * IA's address. */
    v.comm = (DAT_COMM){AF_INET, SOCK_STREAM, 0};
    struct sockaddr_in la;
    memcpy(&la, v.local_ia_address_ptr, sizeof la);
    v.local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&la;
    unsigned checked = 0;
    for (int b = 0; b < 31; b++) {
        DAT_EP_PARAM_MASK bit = UINT64_C(1) << b;
        enum rule r = rule_of(bit);
        for (size_t i = 0; i < fx_ep_nstates; i++) {
            DAT_EP_STATE s = fx_ep_states[i].s;
            fx_force_state(ep, s);
            DAT_RETURN rc = p->ep_modify_func(ep, bit, &v);
            if (r == NEVER)
                ck_assert_msg(rc == (DAT_RETURN)(DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2),
                              "field 0x%llx state %d: 0x%x", (unsigned long long)bit, (int)s, (unsigned)rc);
            else if (rule_allows(r, s))
                ck_assert_msg(rc == DAT_SUCCESS, "field 0x%llx state %d: 0x%x, want success",
                              (unsigned long long)bit, (int)s, (unsigned)rc);
            else
                ck_assert_msg(rc == (DAT_RETURN)(DAT_CLASS_ERROR | DAT_INVALID_STATE | fx_ep_states[i].sub),
                              "field 0x%llx state %d: 0x%x, want INVALID_STATE|%u", (unsigned long long)bit, (int)s,
                              (unsigned)rc, (unsigned)fx_ep_states[i].sub);
            checked++;
        }
    }
    ck_assert_uint_eq(checked, 31 * fx_ep_nstates);
    /* A refused modify changes nothing: the state stays, and so do values. */
    fx_force_state(ep, DAT_EP_STATE_CONNECTED);
    DAT_EP_PARAM w = v;
    w.ep_attr.max_recv_dtos = 3;
    w.pz_handle = f.pz2;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS | DAT_EP_FIELD_PZ_HANDLE, &w),
                      DAT_INVALID_STATE, DAT_INVALID_STATE_EP_CONNECTED);
    DAT_EP_PARAM q;
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &q));
    ck_assert_int_eq(q.ep_state, DAT_EP_STATE_CONNECTED);
    ck_assert_int_eq(q.ep_attr.max_recv_dtos, v.ep_attr.max_recv_dtos);
    ck_assert_ptr_eq(q.pz_handle, f.pz);
    /* The whole allowed set at once in Unconnected. */
    fx_force_state(ep, DAT_EP_STATE_UNCONNECTED);
    DAT_EP_PARAM_MASK all_ok = DAT_EP_FIELD_ALL & ~(DAT_EP_FIELD_IA_HANDLE | DAT_EP_FIELD_EP_STATE |
                                                    DAT_EP_FIELD_LOCAL_PORT_QUAL | DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR |
                                                    DAT_EP_FIELD_REMOTE_PORT_QUAL | DAT_EP_FIELD_SRQ_HANDLE |
                                                    DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW);
    w = v;
    w.pz_handle = f.pz2;
    w.ep_attr.max_recv_dtos = 5;
    ck_assert_dat_ok(p->ep_modify_func(ep, all_ok, &w));
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &q));
    ck_assert_ptr_eq(q.pz_handle, f.pz2);
    ck_assert_int_ge(q.ep_attr.max_recv_dtos, 5);
    ck_assert_int_eq(q.comm.domain, AF_INET);
    ck_assert_int_eq(q.comm.type, SOCK_STREAM);
    ck_assert_dat_ok(p->ep_free_func(ep));
    fx_teardown(&f);
}
END_TEST

START_TEST(modify_bad_values)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-mv");
    DAT_PROVIDER *p = f.p;
    DAT_EP_HANDLE ep = mk_ep(&f);
    DAT_EP_PARAM v, q;
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &v));
    /* mask and param */
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_ALL + 1, &v), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_QOS, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_ok(p->ep_modify_func(ep, 0, NULL));
    ck_assert_dat_ok(p->ep_modify_func(ep, 0, &v));
    /* handles */
    DAT_EP_PARAM w = v;
    DAT_PZ_HANDLE bad_pz[] = {(DAT_PZ_HANDLE)junk, (DAT_PZ_HANDLE)f.dto, f.pz_dead, f.pz_ia2};
    for (size_t i = 0; i < sizeof bad_pz / sizeof bad_pz[0]; i++) {
        w.pz_handle = bad_pz[i];
        ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_PZ_HANDLE, &w), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_PZ);
    }
    w = v;
    DAT_EVD_HANDLE bad_evd[] = {(DAT_EVD_HANDLE)junk, (DAT_EVD_HANDLE)f.pz, f.evd_dead, f.dto_o, f.cr};
    for (size_t i = 0; i < sizeof bad_evd / sizeof bad_evd[0]; i++) {
        w = v;
        w.recv_evd_handle = w.request_evd_handle = w.connect_evd_handle = bad_evd[i];
        ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_RECV_EVD_HANDLE, &w), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_RECV);
        ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_REQUEST_EVD_HANDLE, &w), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_REQUEST);
        ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &w), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_CONN);
    }
    w = v;
    w.connect_evd_handle = f.dto; /* no connection stream */
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &w), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CONN);
    /* attribute values: each beyond what dat_ia_query reports → ARG3 */
    for (int k = 0;; k++) {
        w = v;
        DAT_EP_PARAM_MASK m;
        switch (k) {
        case 0: w.ep_attr.service_type = (DAT_SERVICE_TYPE)0x7777; m = DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE; break;
        case 1: w.ep_attr.max_message_size = SD_MAX_MESSAGE_SIZE + 1ull; m = DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE; break;
        case 2: w.ep_attr.max_rdma_size = SD_MAX_RDMA_SIZE + 1ull; m = DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE; break;
        case 3: w.ep_attr.qos = (DAT_QOS)0x100; m = DAT_EP_FIELD_EP_ATTR_QOS; break;
        case 4: w.ep_attr.recv_completion_flags = 0x80; m = DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS; break;
        case 5: w.ep_attr.request_completion_flags = 0x80; m = DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS; break;
        case 6: w.ep_attr.max_recv_dtos = SD_MAX_DTO_PER_EP + 1; m = DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS; break;
        case 7: w.ep_attr.max_request_dtos = -1; m = DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS; break;
        case 8: w.ep_attr.max_recv_iov = SD_MAX_IOV_PER_DTO + 1; m = DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV; break;
        case 9: w.ep_attr.max_request_iov = SD_MAX_IOV_PER_DTO + 1; m = DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV; break;
        case 10: w.ep_attr.max_rdma_read_in = SD_MAX_RDMA_READ_PER_EP_IN + 1; m = DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN; break;
        case 11: w.ep_attr.max_rdma_read_out = SD_MAX_RDMA_READ_PER_EP_OUT + 1; m = DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT; break;
        case 12: w.ep_attr.max_rdma_read_iov = SD_MAX_IOV_PER_RDMA_READ + 1; m = DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV; break;
        case 13: w.ep_attr.max_rdma_write_iov = SD_MAX_IOV_PER_RDMA_WRITE + 1; m = DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV; break;
        case 14: w.ep_attr.ep_transport_specific_count = -1; m = DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR; break;
        case 15: w.ep_attr.ep_transport_specific_count = 2; w.ep_attr.ep_transport_specific = NULL; m = DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR; break;
        case 16: w.ep_attr.ep_provider_specific_count = -1; m = DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR; break;
        case 17: w.ep_attr.ep_provider_specific_count = 2; w.ep_attr.ep_provider_specific = NULL; m = DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR; break;
        /* the communicator: a TCP stream socket of the IA's family only */
        case 18: w.comm = (DAT_COMM){0, SOCK_STREAM, 0}; m = DAT_EP_FIELD_COMM; break;
        case 19: w.comm = (DAT_COMM){AF_UNIX, SOCK_STREAM, 0}; m = DAT_EP_FIELD_COMM; break;
        case 20: w.comm = (DAT_COMM){AF_INET, SOCK_DGRAM, 0}; m = DAT_EP_FIELD_COMM; break;
        case 21: w.comm = (DAT_COMM){AF_INET, SOCK_STREAM, IPPROTO_UDP}; m = DAT_EP_FIELD_COMM; break;
        case 22: w.comm = (DAT_COMM){AF_INET6, SOCK_STREAM, 0}; m = DAT_EP_FIELD_COMM; break; /* IA is IPv4 */
        /* the local address: the IA's only */
        case 23: w.local_ia_address_ptr = NULL; m = DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR; break;
        default: goto attrs_done;
        }
        DAT_RETURN rc = p->ep_modify_func(ep, m, &w);
        ck_assert_msg(rc == (DAT_RETURN)(DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3),
                      "case %d: 0x%x", k, (unsigned)rc);
    }
attrs_done:;
    struct sockaddr_in other = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
    w = v;
    w.local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&other;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR, &w), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    /* RC <-> UD is chosen at create, never switched. */
    w.ep_attr.service_type = DAT_SERVICE_TYPE_EXTENSION_BASE;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE, &w), DAT_MODEL_NOT_SUPPORTED, 0);
    /* Nothing above changed the EP. */
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &q));
    ck_assert_int_eq(q.ep_attr.max_recv_dtos, v.ep_attr.max_recv_dtos);
    ck_assert_int_eq(q.ep_attr.qos, v.ep_attr.qos);
    ck_assert_int_eq(q.comm.domain, 0);
    ck_assert_ptr_eq(q.connect_evd_handle, f.conn);

    /* The communicator is assigned once; the same one again is a no-op. */
    w = v;
    w.comm = (DAT_COMM){AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP};
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_COMM, &w));
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_COMM, &w));
    DAT_EP_PARAM w2 = w;
    w2.comm.protocol = 0;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_COMM, &w2), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_COMM, &q));
    ck_assert_int_eq(q.comm.domain, AF_INET);
    ck_assert_int_eq(q.comm.type, SOCK_STREAM | SOCK_CLOEXEC);
    ck_assert_int_eq(q.comm.protocol, IPPROTO_TCP);
    /* It survives reset (an attribute, not connection state). */
    ck_assert_dat_ok(p->ep_reset_func(ep));
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_COMM, &q));
    ck_assert_int_eq(q.comm.protocol, IPPROTO_TCP);

    /* A configured EP never goes back to unconfigured (L5467). */
    w = v;
    w.pz_handle = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_PZ_HANDLE, &w), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    w = v;
    w.connect_evd_handle = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &w), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    w = v;
    w.recv_evd_handle = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_RECV_EVD_HANDLE, &w), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    /* ... but dropping the recv EVD together with every receive slot is fine. */
    w.ep_attr.max_recv_dtos = 0;
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &w));
    ck_assert_int_eq(get_state(&f, ep), DAT_EP_STATE_UNCONNECTED);
    w = v;
    w.request_evd_handle = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_REQUEST_EVD_HANDLE, &w), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &v));

    /* recv_completion_flags: not after a receive was posted (L6310). */
    static char buf[64];
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT ctx;
    ck_assert_dat_ok(p->lmr_create_func(f.ia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){.for_va = buf},
                                        sizeof buf, f.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &ctx, NULL,
                                        NULL, NULL));
    DAT_LMR_TRIPLET iov = {.lmr_context = ctx, .virtual_address = (DAT_VADDR)(uintptr_t)buf,
                           .segment_length = sizeof buf};
    ck_assert_dat_ok(p->ep_post_recv_func(ep, 1, &iov, (DAT_DTO_COOKIE){.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG));
    w = v;
    w.ep_attr.recv_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &w), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONNECTED);
    w.ep_attr.recv_completion_flags = v.ep_attr.recv_completion_flags; /* unchanged: fine */
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, &w));
    ck_assert_dat_ok(p->ep_free_func(ep));
    ck_assert_dat_ok(p->lmr_free_func(lmr));

    /* With an SRQ: max_recv_dtos is the hard watermark (L6316). */
    DAT_SRQ_ATTR sa = {.max_recv_dtos = 8, .max_recv_iov = 1, .low_watermark = DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq;
    ck_assert_dat_ok(p->srq_create_func(f.ia, f.pz, &sa, &srq));
    DAT_EP_ATTR ea;
    sd_ep_default_attr(&ea);
    ea.max_recv_dtos = DAT_HW_DEFAULT;
    ea.srq_soft_hw = DAT_HW_DEFAULT;
    ck_assert_dat_ok(p->ep_create_with_srq_func(f.ia, f.pz, f.dto, f.dto, f.conn, srq, &ea, &ep));
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &w));
    w.ep_attr.max_recv_dtos = 4;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &w), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW, &w), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_SRQ_HANDLE, &w), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->ep_free_func(ep));
    ck_assert_dat_ok(p->srq_free_func(srq));
    fx_teardown(&f);
}
END_TEST

/* Unconfigured EPs become configured only through modify (L5461-5466). */
START_TEST(modify_configures_unconfigured)
{
    struct fx f;
    fx_setup(&f, "t-rc-ep-mc");
    DAT_PROVIDER *p = f.p;
    DAT_EP_HANDLE ep;
    ck_assert_dat_ok(p->ep_create_func(f.ia, NULL, NULL, NULL, NULL, NULL, &ep));
    ck_assert_int_eq(get_state(&f, ep), DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
    DAT_EP_PARAM v;
    memset(&v, 0, sizeof v);
    v.pz_handle = f.pz;
    v.recv_evd_handle = v.request_evd_handle = f.dto;
    v.connect_evd_handle = f.conn;
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_PZ_HANDLE, &v));
    ck_assert_int_eq(get_state(&f, ep), DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE, &v));
    ck_assert_int_eq(get_state(&f, ep), DAT_EP_STATE_UNCONFIGURED_UNCONNECTED); /* request EVD missing */
    /* Unconfigured: a PZ may be removed again. */
    DAT_EP_PARAM z;
    memset(&z, 0, sizeof z);
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_PZ_HANDLE, &z));
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_REQUEST_EVD_HANDLE, &v));
    ck_assert_int_eq(get_state(&f, ep), DAT_EP_STATE_UNCONNECTED);
    /* The same from the other unconfigured states. */
    static const DAT_EP_STATE from[] = {DAT_EP_STATE_UNCONFIGURED_RESERVED, DAT_EP_STATE_UNCONFIGURED_PASSIVE,
                                        DAT_EP_STATE_UNCONFIGURED_TENTATIVE};
    static const DAT_EP_STATE to[] = {DAT_EP_STATE_RESERVED, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING,
                                      DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING};
    for (int i = 0; i < 3; i++) {
        DAT_EP_HANDLE u;
        ck_assert_dat_ok(p->ep_create_func(f.ia, NULL, f.dto, f.dto, f.conn, NULL, &u));
        fx_force_state(u, from[i]);
        ck_assert_dat_ok(p->ep_modify_func(u, DAT_EP_FIELD_PZ_HANDLE, &v));
        ck_assert_int_eq(get_state(&f, u), to[i]);
        fx_force_state(u, DAT_EP_STATE_UNCONNECTED);
        ck_assert_dat_ok(p->ep_free_func(u));
    }
    ck_assert_dat_ok(p->ep_free_func(ep));
    fx_teardown(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_ep");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, create_bad_handles);
    tcase_add_test(tc, create_bad_parameters);
    tcase_add_test(tc, create_beyond_max_eps);
    tcase_add_test(tc, create_with_srq_arguments);
    tcase_add_test(tc, bad_ep_handles);
    tcase_add_test(tc, query_status_recv_query);
    tcase_add_test(tc, set_watermark_codes);
    tcase_add_test(tc, free_and_reset_every_state);
    tcase_add_test(tc, modify_every_field_every_state);
    tcase_add_test(tc, modify_bad_values);
    tcase_add_test(tc, modify_configures_unconfigured);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
