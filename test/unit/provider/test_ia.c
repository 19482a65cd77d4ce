/* IA: address resolution from ia_params, open argument checks, async EVD
 * modes, query contents and masks, graceful/abrupt close. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>

#include "test/lib/prov_fixture.h"
#include "lib/provider/evd.h"

static int counter;

/* A fresh record per test case so ia_params can differ. */
static DAT_PROVIDER *record_with(const char *params)
{
    char name[64];
    snprintf(name, sizeof name, "t-ia-%d", counter++);
    return fx_provider(name, params, DAT_FALSE);
}

static const struct sockaddr *query_addr(DAT_PROVIDER *p, DAT_IA_HANDLE ia)
{
    DAT_IA_ATTR a;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &a, 0, NULL));
    ck_assert_ptr_nonnull(a.ia_address_ptr);
    return a.ia_address_ptr;
}

static void expect_v4(const char *params, const char *want)
{
    DAT_PROVIDER *p = record_with(params);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    const struct sockaddr *sa = query_addr(p, ia);
    ck_assert_int_eq(sa->sa_family, AF_INET);
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf, sizeof buf);
    ck_assert_str_eq(buf, want);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}

START_TEST(address_from_interface_and_literals)
{
    expect_v4("lo", "127.0.0.1");
    expect_v4("127.0.0.1", "127.0.0.1");
    expect_v4("localhost", "127.0.0.1");
    expect_v4("127.0.0.1 0", "127.0.0.1"); /* OFA style "addr port" */
    expect_v4("  lo  ", "127.0.0.1");
    expect_v4("127.0.0.5", "127.0.0.5"); /* 127/8 is all local */
}
END_TEST

START_TEST(address_ipv6_literal)
{
    DAT_PROVIDER *p = record_with("::1");
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_RETURN rc = p->ia_open_func((DAT_NAME_PTR)p->device_name, 8, &evd, &ia);
    if (rc != DAT_SUCCESS) /* hosts with IPv6 disabled have no ::1 */
        return;
    const struct sockaddr *sa = query_addr(p, ia);
    ck_assert_int_eq(sa->sa_family, AF_INET6);
    ck_assert(IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(unusable_ia_params)
{
    const char *bad[] = {"nosuchif0", "0.0.0.0", "::", "192.0.2.7", "", "no-such-host.invalid"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        DAT_PROVIDER *p = record_with(bad[i]);
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        ck_assert_dat_err(p->ia_open_func((DAT_NAME_PTR)p->device_name, 8, &evd, &ia), DAT_INVALID_PARAMETER,
                          DAT_INVALID_ARG1);
        ck_assert_ptr_null(ia);
        ck_assert_ptr_null(evd);
    }
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(open_argument_errors)
{
    DAT_PROVIDER *p = record_with("lo");
    DAT_NAME_PTR name = (DAT_NAME_PTR)p->device_name;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ia_open_func(NULL, 8, &evd, &ia), DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    ck_assert_dat_err(p->ia_open_func(name, -1, &evd, &ia), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ia_open_func(name, SD_MAX_EVD_QLEN + 1, &evd, &ia), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ia_open_func(name, 8, NULL, &ia), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ia_open_func(name, 8, &evd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ia_open_func((DAT_NAME_PTR) "other-ia", 8, &evd, &ia), DAT_PROVIDER_NOT_FOUND,
                      DAT_NAME_NOT_REGISTERED);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(async_evd_modes)
{
    DAT_PROVIDER *p = record_with("lo");
    DAT_NAME_PTR name = (DAT_NAME_PTR)p->device_name;
    /* NULL: the provider creates one, qlen >= requested, ASYNC stream. */
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, q;
    DAT_IA_HANDLE ia1;
    ck_assert_dat_ok(p->ia_open_func(name, 200, &async, &ia1));
    ck_assert_ptr_nonnull(async);
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(async, DAT_EVD_FIELD_ALL, &ep));
    ck_assert_int_ge(ep.evd_qlen, 200);
    ck_assert_int_eq(ep.evd_flags, DAT_EVD_ASYNC_FLAG);
    ck_assert_ptr_eq(ep.ia_handle, ia1);
    ck_assert_ptr_null(ep.cno_handle);
    ck_assert_int_eq(ep.evd_state & (DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_WAITABLE),
                     DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_WAITABLE);
    ck_assert_dat_ok(p->ia_query_func(ia1, &q, 0, NULL, 0, NULL));
    ck_assert_ptr_eq(q, async);

    /* DAT_EVD_ASYNC_EXISTS: accepted, reported as out of scope. */
    DAT_EVD_HANDLE exists = DAT_EVD_ASYNC_EXISTS;
    DAT_IA_HANDLE ia2;
    ck_assert_dat_ok(p->ia_open_func(name, 0, &exists, &ia2));
    ck_assert_ptr_eq(exists, DAT_EVD_ASYNC_EXISTS);
    ck_assert_dat_ok(p->ia_query_func(ia2, &q, 0, NULL, 0, NULL));
    ck_assert_ptr_eq(q, DAT_EVD_OUT_OF_SCOPE);

    /* The consumer's async EVD of another IA: used, not owned. */
    DAT_EVD_HANDLE shared = async;
    DAT_IA_HANDLE ia3;
    ck_assert_dat_ok(p->ia_open_func(name, 0, &shared, &ia3));
    ck_assert_ptr_eq(shared, async);
    ck_assert_dat_ok(p->ia_query_func(ia3, &q, 0, NULL, 0, NULL));
    ck_assert_ptr_eq(q, async);
    ck_assert_dat_ok(p->ia_close_func(ia3, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(p->evd_query_func(async, DAT_EVD_FIELD_ALL, &ep)); /* still there */

    /* A non-async EVD or garbage: INVALID_HANDLE_EVD_ASYNC, handle untouched. */
    DAT_EVD_HANDLE dto;
    ck_assert_dat_ok(p->evd_create_func(ia1, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
    DAT_EVD_HANDLE in = dto;
    DAT_IA_HANDLE ia4 = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ia_open_func(name, 0, &in, &ia4), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
    ck_assert_ptr_eq(in, dto);
    ck_assert_ptr_null(ia4);
    in = (DAT_EVD_HANDLE)&counter;
    ck_assert_dat_err(p->ia_open_func(name, 0, &in, &ia4), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
    ck_assert_ptr_eq(in, (DAT_EVD_HANDLE)&counter);

    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia1, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_err(p->evd_query_func(async, DAT_EVD_FIELD_ALL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_REQUEST);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

static const char *named(const DAT_NAMED_ATTR *a, DAT_COUNT n, const char *name)
{
    for (DAT_COUNT i = 0; i < n; i++)
        if (strcmp(a[i].name, name) == 0)
            return a[i].value;
    return NULL;
}

START_TEST(query_contents)
{
    DAT_PROVIDER *p = record_with("lo");
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR a;
    DAT_PROVIDER_ATTR pa;
    memset(&a, 0xAB, sizeof a);
    memset(&pa, 0xAB, sizeof pa);
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &pa));
    ck_assert_str_eq(a.adapter_name, p->device_name);
    ck_assert_str_eq(a.vendor_name, "softdat");
    ck_assert_int_eq(a.extension_supported, DAT_EXTENSION_IB);
    ck_assert_int_eq(a.extension_version, 209);
    ck_assert_int_eq(a.max_eps, SD_MAX_EPS);
    ck_assert_int_eq(a.max_dto_per_ep, SD_MAX_DTO_PER_EP);
    ck_assert_int_eq(a.max_evd_qlen, SD_MAX_EVD_QLEN);
    ck_assert_int_eq(a.max_iov_segments_per_dto, SD_MAX_IOV_PER_DTO);
    ck_assert_uint_eq(a.max_message_size, SD_MAX_MESSAGE_SIZE);
    ck_assert_uint_eq(a.max_rdma_size, SD_MAX_RDMA_SIZE);
    ck_assert_int_eq(a.max_rdma_read_per_ep_in, SD_MAX_RDMA_READ_PER_EP_IN);
    ck_assert_int_eq(a.max_rdma_read_per_ep_out, SD_MAX_RDMA_READ_PER_EP_OUT);
    /* Consistency between related limits. */
    ck_assert_int_ge(a.max_rdma_read_in, a.max_rdma_read_per_ep_in);
    ck_assert_int_ge(a.max_rdma_read_out, a.max_rdma_read_per_ep_out);
    ck_assert_int_le(a.max_ep_per_srq, a.max_eps);
    ck_assert_int_ge(a.max_evds, 2);
    ck_assert_int_ge(a.max_iov_segments_per_rdma_read, 1);
    ck_assert_int_ge(a.max_iov_segments_per_rdma_write, 1);
    ck_assert_uint_ge(a.max_lmr_block_size, a.max_message_size);
    ck_assert_int_eq(a.max_rdma_read_per_ep_in_guaranteed, DAT_FALSE);
    ck_assert_int_gt(a.num_transport_attr, 0);
    ck_assert_ptr_nonnull(a.transport_attr);
    ck_assert_int_gt(a.num_vendor_attr, 0);
    ck_assert_int_eq(a.ia_address_ptr->sa_family, AF_INET);

    ck_assert_str_eq(pa.provider_name, "softdat");
    ck_assert_uint_eq(pa.dapl_version_major, 2);
    ck_assert_uint_eq(pa.dapl_version_minor, 0);
    ck_assert_int_eq(pa.is_thread_safe, DAT_FALSE);
    ck_assert_int_ge(pa.max_private_data_size, 64);
    ck_assert_int_eq(pa.max_private_data_size, SD_MAX_PRIVATE_DATA);
    ck_assert_uint_eq(256 % pa.optimal_buffer_alignment, 0);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
            ck_assert_int_eq(pa.evd_stream_merging_supported[i][j], DAT_TRUE);
    ck_assert_int_eq(pa.lmr_mem_types_supported,
                     DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL);
    const DAT_NAMED_ATTR *sa = pa.provider_specific_attr;
    DAT_COUNT n = pa.num_provider_specific_attr;
    ck_assert_str_eq(named(sa, n, "DAT_EXTENSION_INTERFACE"), "TRUE");
    ck_assert_str_eq(named(sa, n, "DAT_IB_RDMA_READ"), "TRUE");
    ck_assert_str_eq(named(sa, n, "DAT_IB_IMMED_DATA"), "TRUE");
    ck_assert_str_eq(named(sa, n, "DAT_IB_CMP_AND_SWAP"), "TRUE");
    ck_assert_str_eq(named(sa, n, "DAT_IB_FETCH_AND_ADD"), "TRUE");
    ck_assert_int_eq(atoi(named(sa, n, "DAT_IB_TRANSPORT_MTU")), SD_TRANSPORT_MTU);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(query_masks_and_null_pointers)
{
    DAT_PROVIDER *p = record_with("lo");
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR a;
    DAT_PROVIDER_ATTR pa;
    /* What libdat2 does after open and before close. */
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_ALL, &a, 0, NULL));
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pa));
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_ALL, NULL, DAT_PROVIDER_FIELD_ALL, NULL));
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, 0, NULL, 0, NULL));
    ck_assert_dat_err(p->ia_query_func(ia, NULL, DAT_IA_FIELD_ALL + 1, &a, 0, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ia_query_func(ia, NULL, 0, NULL, (DAT_PROVIDER_ATTR_MASK)1 << 40, &pa),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(threadsafe_record_reports_threadsafe)
{
    DAT_PROVIDER *p = fx_provider("t-ts", "lo", DAT_TRUE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PROVIDER_ATTR pa;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_IS_THREAD_SAFE, &pa));
    ck_assert_int_eq(pa.is_thread_safe, DAT_TRUE);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(close_graceful_and_abrupt)
{
    DAT_PROVIDER *p = record_with("lo");
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = fx_open(p, &async);
    ck_assert_dat_err(p->ia_close_func(ia, (DAT_CLOSE_FLAGS)7), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_PZ_HANDLE pz[3];
    DAT_EVD_HANDLE evd[2];
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(p->pz_create_func(ia, &pz[i]));
    ck_assert_dat_ok(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd[0]));
    ck_assert_dat_ok(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &evd[1]));
    /* A PZ with a user (stand-in for an LMR/EP until those land). */
    ck_assert_int_eq(sd_handle_dep_get((struct sd_handle *)pz[0]), 1);

    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_IA_IN_USE);
    /* Nothing was destroyed by the failed graceful close. */
    DAT_PZ_PARAM pp;
    ck_assert_dat_ok(p->pz_query_func(pz[2], DAT_PZ_FIELD_ALL, &pp));
    ck_assert_uint_eq(sd_handle_live_count(), 7); /* ia, async, 3 pz, 2 evd */

    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    for (int i = 0; i < 3; i++)
        ck_assert_dat_err(p->pz_free_func(pz[i]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    for (int i = 0; i < 2; i++)
        ck_assert_dat_err(p->evd_free_func(evd[i]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    ck_assert_dat_err(p->evd_free_func(async), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_uint_eq(sd_handle_live_count(), 0);

    /* Graceful succeeds once only the provider's async EVD is left, also if
     * the consumer freed that EVD itself. */
    async = DAT_HANDLE_NULL;
    ia = fx_open(p, &async);
    ck_assert_dat_ok(p->evd_free_func(async));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(detach_drains_everything)
{
    DAT_PROVIDER_INFO info = fx_info("t-detach", DAT_FALSE);
    struct sd_provider_rec *rec = sd_provider_attach(&info, "lo");
    ck_assert_ptr_nonnull(rec);
    int before = sd_provider_attached_count();
    DAT_IA_HANDLE ia = fx_open(&rec->table, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(rec->table.pz_create_func(ia, &pz));
    ck_assert_dat_ok(rec->table.ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_int_eq(sd_provider_detach(&info), 0);
    ck_assert_int_eq(sd_provider_attached_count(), before - 1);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-ia");
    TCase *tc = tcase_create("ia");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, address_from_interface_and_literals);
    tcase_add_test(tc, address_ipv6_literal);
    tcase_add_test(tc, unusable_ia_params);
    tcase_add_test(tc, open_argument_errors);
    tcase_add_test(tc, async_evd_modes);
    tcase_add_test(tc, query_contents);
    tcase_add_test(tc, query_masks_and_null_pointers);
    tcase_add_test(tc, threadsafe_record_reports_threadsafe);
    tcase_add_test(tc, close_graceful_and_abrupt);
    tcase_add_test(tc, detach_drains_everything);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
