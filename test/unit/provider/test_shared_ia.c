/* Objects shared between open instances of one IA (issue 8 §4a): an EP or
 * a service point of one instance may feed EVDs of another instance of the
 * same IA (same dat.conf name and address), as dapltest -T L -w N relies
 * on; anything else (another IA, memory objects of another instance,
 * garbage) is still refused with the parameter's handle subtype. */
#include "test/lib/prov_fixture.h"

START_TEST(evd_of_other_instance_accepted)
{
    DAT_PROVIDER *p = fx_provider("t-shr1", "127.0.0.1", DAT_FALSE);
    DAT_PROVIDER *pts = fx_provider("t-shr1", "127.0.0.1", DAT_TRUE); /* same IA, other record */
    DAT_IA_HANDLE ia0 = fx_open(p, NULL), ia1 = fx_open(p, NULL), ia2 = fx_open(pts, NULL);
    DAT_EVD_HANDLE conn0, dto0, cr0;
    DAT_PZ_HANDLE pz0, pz1;
    ck_assert_dat_ok(p->evd_create_func(ia0, 8, NULL, DAT_EVD_CONNECTION_FLAG, &conn0));
    ck_assert_dat_ok(p->evd_create_func(ia0, 8, NULL, DAT_EVD_DTO_FLAG, &dto0));
    ck_assert_dat_ok(p->evd_create_func(ia0, 8, NULL, DAT_EVD_CR_FLAG, &cr0));
    ck_assert_dat_ok(p->pz_create_func(ia0, &pz0));
    ck_assert_dat_ok(p->pz_create_func(ia1, &pz1));

    DAT_EP_HANDLE ep1, ep2;
    ck_assert_dat_ok(p->ep_create_func(ia1, pz1, dto0, dto0, conn0, NULL, &ep1));
    DAT_EP_PARAM ep;
    ck_assert_dat_ok(p->ep_query_func(ep1, DAT_EP_FIELD_ALL, &ep));
    ck_assert_ptr_eq(ep.connect_evd_handle, conn0);
    ck_assert_ptr_eq(ep.ia_handle, ia1);
    /* The thread-safe record of the same IA name and address: same device. */
    DAT_PZ_HANDLE pz2;
    ck_assert_dat_ok(pts->pz_create_func(ia2, &pz2));
    ck_assert_dat_ok(pts->ep_create_func(ia2, pz2, NULL, NULL, conn0, NULL, &ep2));

    /* A service point of instance 1 with a CR EVD of instance 0. */
    DAT_PSP_HANDLE psp;
    ck_assert_dat_ok(p->psp_create_any_func(ia1, &(DAT_CONN_QUAL){0}, cr0, DAT_PSP_CONSUMER_FLAG, &psp));

    /* Memory objects stay per instance: a PZ of instance 0 is refused. */
    DAT_EP_HANDLE bad = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ep_create_func(ia1, pz0, NULL, NULL, conn0, NULL, &bad), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_PZ);
    /* An EVD is in use by the other instance's EP. */
    ck_assert_dat_err(p->evd_free_func(conn0), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);

    ck_assert_dat_ok(p->psp_free_func(psp));
    ck_assert_dat_ok(p->ep_free_func(ep1));
    ck_assert_dat_ok(pts->ep_free_func(ep2));
    ck_assert_dat_ok(pts->pz_free_func(pz2));
    ck_assert_dat_ok(p->pz_free_func(pz0));
    ck_assert_dat_ok(p->pz_free_func(pz1));
    ck_assert_dat_ok(p->evd_free_func(conn0));
    ck_assert_dat_ok(p->evd_free_func(dto0));
    ck_assert_dat_ok(p->evd_free_func(cr0));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia1, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia0, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(other_ia_and_garbage_refused)
{
    DAT_PROVIDER *p = fx_provider("t-shr2", "127.0.0.1", DAT_FALSE);
    DAT_PROVIDER *q = fx_provider("t-shr3", "127.0.0.1", DAT_FALSE); /* another IA name */
    DAT_PROVIDER *r = fx_provider("t-shr4", "::1", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL), iq = fx_open(q, NULL), ir = fx_open(r, NULL);
    DAT_EVD_HANDLE cq, cr, crq;
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(q->evd_create_func(iq, 8, NULL, DAT_EVD_CONNECTION_FLAG, &cq));
    ck_assert_dat_ok(r->evd_create_func(ir, 8, NULL, DAT_EVD_CONNECTION_FLAG, &cr));
    ck_assert_dat_ok(q->evd_create_func(iq, 8, NULL, DAT_EVD_CR_FLAG, &crq));
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ep_create_func(ia, pz, NULL, NULL, cq, NULL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CONN);
    ck_assert_dat_err(p->ep_create_func(ia, pz, NULL, NULL, cr, NULL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CONN);
    ck_assert_dat_err(p->ep_create_func(ia, pz, cq, NULL, NULL, NULL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_RECV);
    static char junk[256];
    ck_assert_dat_err(p->ep_create_func(ia, pz, NULL, NULL, (DAT_EVD_HANDLE)(junk + 8), NULL, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
    ck_assert_dat_err(p->ep_create_func(ia, pz, NULL, NULL, (DAT_EVD_HANDLE)pz, NULL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CONN);
    ck_assert_ptr_null(ep);
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->psp_create_any_func(ia, &(DAT_CONN_QUAL){0}, crq, DAT_PSP_CONSUMER_FLAG, &psp),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(q->evd_free_func(cq));
    ck_assert_dat_ok(q->evd_free_func(crq));
    ck_assert_dat_ok(r->evd_free_func(cr));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(q->ia_close_func(iq, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(r->ia_close_func(ir, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

/* Abrupt close of the instance that owns the EVD while another instance's
 * EP still uses it: no crash, the EP can still be freed. */
START_TEST(abrupt_close_of_evd_owner)
{
    DAT_PROVIDER *p = fx_provider("t-shr5", "127.0.0.1", DAT_FALSE);
    DAT_IA_HANDLE ia0 = fx_open(p, NULL), ia1 = fx_open(p, NULL);
    DAT_EVD_HANDLE conn0;
    DAT_PZ_HANDLE pz1;
    DAT_EP_HANDLE ep1;
    ck_assert_dat_ok(p->evd_create_func(ia0, 8, NULL, DAT_EVD_CONNECTION_FLAG, &conn0));
    ck_assert_dat_ok(p->pz_create_func(ia1, &pz1));
    ck_assert_dat_ok(p->ep_create_func(ia1, pz1, NULL, NULL, conn0, NULL, &ep1));
    ck_assert_dat_ok(p->ia_close_func(ia0, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(p->ep_free_func(ep1));
    ck_assert_dat_ok(p->pz_free_func(pz1));
    ck_assert_dat_ok(p->ia_close_func(ia1, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-shared-ia");
    TCase *tc = tcase_create("shared");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, evd_of_other_instance_accepted);
    tcase_add_test(tc, other_ia_and_garbage_refused);
    tcase_add_test(tc, abrupt_close_of_evd_owner);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
