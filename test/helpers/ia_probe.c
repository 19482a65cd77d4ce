/* ia_probe: open a DAT IA by name through the registry (ours or Debian's),
 * query IA and provider attributes, exercise a PZ, consumer context and
 * handle types, close; optionally several times in one process, checking
 * that the provider library is unloaded in between.
 *
 *   ia_probe [-4|-6] [-n ROUNDS] [-u] IA_NAME
 *     -4 / -6   require an AF_INET / AF_INET6 IA address
 *     -n ROUNDS open/close cycles (default 1)
 *     -u        require libdaplsoft to be unmapped after each last close
 * Prints what it sees on stdout; exit 0 when every check passed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dat2/udat.h>

static int failures;

#define CHECK(cond, ...)                                    \
    do {                                                    \
        if (!(cond)) {                                      \
            failures++;                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);     \
            printf(__VA_ARGS__);                            \
            printf("\n");                                   \
        }                                                   \
    } while (0)

static const char *named(const DAT_NAMED_ATTR *a, DAT_COUNT n, const char *name)
{
    for (DAT_COUNT i = 0; i < n; i++)
        if (a[i].name && strcmp(a[i].name, name) == 0)
            return a[i].value;
    return NULL;
}

static int provider_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "libdaplsoft"))
            found = 1;
    fclose(f);
    return found;
}

static void print_addr(const struct sockaddr *sa, int *family)
{
    char buf[INET6_ADDRSTRLEN] = "?";
    *family = sa ? sa->sa_family : -1;
    if (sa == NULL) {
        printf("ia_address: (null)\n");
        return;
    }
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf, sizeof buf);
    printf("ia_address: %s (family %d)\n", buf, sa->sa_family);
}

static int addr_nonzero(const struct sockaddr *sa)
{
    if (sa == NULL)
        return 0;
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr != 0;
    if (sa->sa_family == AF_INET6) {
        static const struct in6_addr any = IN6ADDR_ANY_INIT;
        return memcmp(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, &any, sizeof any) != 0;
    }
    return 0;
}

static void round_trip(char *name, int want_family, int round)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_RETURN rc = dat_ia_open(name, 8, &async, &ia);
    printf("round %d: dat_ia_open(%s) = 0x%x ia=%p async_evd=%p\n", round, name, rc, (void *)ia, (void *)async);
    CHECK(rc == DAT_SUCCESS, "dat_ia_open: 0x%x", rc);
    if (rc != DAT_SUCCESS)
        return;
    CHECK(async != DAT_HANDLE_NULL, "provider did not create the async EVD");

    DAT_IA_ATTR attr;
    DAT_PROVIDER_ATTR pattr;
    DAT_EVD_HANDLE qevd = DAT_HANDLE_NULL;
    memset(&attr, 0, sizeof attr);
    memset(&pattr, 0, sizeof pattr);
    rc = dat_ia_query(ia, &qevd, DAT_IA_FIELD_ALL, &attr, DAT_PROVIDER_FIELD_ALL, &pattr);
    CHECK(rc == DAT_SUCCESS, "dat_ia_query: 0x%x", rc);
    CHECK(qevd == async, "query async evd %p != %p", (void *)qevd, (void *)async);
    printf("adapter_name: %s\nvendor_name: %s\n", attr.adapter_name, attr.vendor_name);
    int family;
    print_addr(attr.ia_address_ptr, &family);
    CHECK(addr_nonzero(attr.ia_address_ptr), "IA address missing or unspecified");
    if (want_family)
        CHECK(family == want_family, "address family %d, want %d", family, want_family);
    CHECK(strcmp(attr.adapter_name, name) == 0, "adapter_name %s", attr.adapter_name);
    printf("max_eps: %d\nmax_dto_per_ep: %d\nmax_evd_qlen: %d\nmax_iov_segments_per_dto: %d\n", attr.max_eps,
           attr.max_dto_per_ep, attr.max_evd_qlen, attr.max_iov_segments_per_dto);
    printf("max_message_size: %u\nmax_rdma_size: %u\nmax_rdma_read_per_ep_in/out: %d/%d\n",
           attr.max_message_size, attr.max_rdma_size, attr.max_rdma_read_per_ep_in,
           attr.max_rdma_read_per_ep_out);
    printf("extension_supported: %d\nextension_version: %d\n", (int)attr.extension_supported,
           attr.extension_version);
    CHECK(attr.extension_supported == DAT_EXTENSION_IB, "extension_supported %d", (int)attr.extension_supported);
    CHECK(attr.extension_version == 209, "extension_version %d", attr.extension_version);
    CHECK(attr.max_eps > 0 && attr.max_dto_per_ep > 0 && attr.max_evd_qlen > 0, "zero limits");

    printf("provider_name: %s\nprovider_version: %u.%u\ndapl_version: %u.%u\nis_thread_safe: %d\n",
           pattr.provider_name, pattr.provider_version_major, pattr.provider_version_minor,
           pattr.dapl_version_major, pattr.dapl_version_minor, (int)pattr.is_thread_safe);
    printf("max_private_data_size: %d\n", pattr.max_private_data_size);
    CHECK(strcmp(pattr.provider_name, "softdat") == 0, "provider_name %s", pattr.provider_name);
    CHECK(pattr.dapl_version_major == 2 && pattr.dapl_version_minor == 0, "dapl version");
    CHECK(pattr.is_thread_safe == DAT_THREADSAFE, "is_thread_safe %d", (int)pattr.is_thread_safe);
    CHECK(pattr.max_private_data_size >= 64, "private data %d", pattr.max_private_data_size);
    for (DAT_COUNT i = 0; i < pattr.num_provider_specific_attr; i++)
        printf("provider_attr: %s=%s\n", pattr.provider_specific_attr[i].name,
               pattr.provider_specific_attr[i].value);
    const char *v = named(pattr.provider_specific_attr, pattr.num_provider_specific_attr, "DAT_IB_RDMA_READ");
    CHECK(v && strcmp(v, "TRUE") == 0, "DAT_IB_RDMA_READ");
    v = named(pattr.provider_specific_attr, pattr.num_provider_specific_attr, "DAT_IB_TRANSPORT_MTU");
    CHECK(v && atoi(v) > 0, "DAT_IB_TRANSPORT_MTU");

    /* PZ, as a consumer sees it: the reported ia_handle is the consumer's. */
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    rc = dat_pz_create(ia, &pz);
    CHECK(rc == DAT_SUCCESS, "dat_pz_create: 0x%x", rc);
    DAT_PZ_PARAM pp = {0};
    rc = dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pp);
    CHECK(rc == DAT_SUCCESS, "dat_pz_query: 0x%x", rc);
    CHECK(pp.ia_handle == ia, "pz ia_handle %p != consumer ia %p", (void *)pp.ia_handle, (void *)ia);
    printf("pz: %p ia_handle %p\n", (void *)pz, (void *)pp.ia_handle);
    DAT_HANDLE_TYPE t = (DAT_HANDLE_TYPE)-1;
    rc = dat_get_handle_type(pz, &t);
    CHECK(rc == DAT_SUCCESS && t == DAT_HANDLE_TYPE_PZ, "pz type 0x%x %d", rc, (int)t);
    rc = dat_get_handle_type(ia, &t);
    CHECK(rc == DAT_SUCCESS && t == DAT_HANDLE_TYPE_IA, "ia type 0x%x %d", rc, (int)t);
    rc = dat_get_handle_type(async, &t);
    CHECK(rc == DAT_SUCCESS && t == DAT_HANDLE_TYPE_EVD, "evd type 0x%x %d", rc, (int)t);
    DAT_CONTEXT ctx = {.as_64 = 0x1234567890ull}, got = {.as_64 = 0};
    rc = dat_set_consumer_context(pz, ctx);
    CHECK(rc == DAT_SUCCESS, "set context 0x%x", rc);
    rc = dat_get_consumer_context(pz, &got);
    CHECK(rc == DAT_SUCCESS && got.as_64 == ctx.as_64, "get context 0x%x", rc);
    rc = dat_set_consumer_context(ia, ctx);
    CHECK(rc == DAT_SUCCESS, "set ia context 0x%x", rc);

    /* Graceful close must refuse while the PZ exists. */
    rc = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
    CHECK(DAT_GET_TYPE(rc) == DAT_INVALID_STATE, "graceful close with PZ: 0x%x", rc);
    rc = dat_pz_free(pz);
    CHECK(rc == DAT_SUCCESS, "dat_pz_free: 0x%x", rc);
    rc = dat_pz_free(pz); /* stale: through the registry, into our quarantine */
    CHECK(DAT_GET_TYPE(rc) == DAT_INVALID_HANDLE && DAT_GET_SUBTYPE(rc) == DAT_INVALID_HANDLE_PZ,
          "stale pz free: 0x%x", rc);
    printf("stale pz free: 0x%x\n", rc);

    if (round % 2 == 0) {
        rc = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
        CHECK(rc == DAT_SUCCESS, "graceful close: 0x%x", rc);
    } else {
        /* Abrupt close with a live child. */
        rc = dat_pz_create(ia, &pz);
        CHECK(rc == DAT_SUCCESS, "dat_pz_create: 0x%x", rc);
        rc = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        CHECK(rc == DAT_SUCCESS, "abrupt close: 0x%x", rc);
    }
    printf("round %d: dat_ia_close = 0x%x\n", round, rc);
}

int main(int argc, char **argv)
{
    int want_family = 0, rounds = 1, want_unload = 0, opt;
    while ((opt = getopt(argc, argv, "46n:u")) != -1) {
        switch (opt) {
        case '4': want_family = AF_INET; break;
        case '6': want_family = AF_INET6; break;
        case 'n': rounds = atoi(optarg); break;
        case 'u': want_unload = 1; break;
        default:
            fprintf(stderr, "usage: %s [-4|-6] [-n ROUNDS] [-u] IA_NAME\n", argv[0]);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: %s [-4|-6] [-n ROUNDS] [-u] IA_NAME\n", argv[0]);
        return 2;
    }
    for (int r = 0; r < rounds; r++) {
        round_trip(argv[optind], want_family, r);
        int mapped = provider_mapped();
        printf("round %d: provider mapped after close: %s\n", r, mapped ? "yes" : "no");
        if (want_unload)
            CHECK(mapped == 0, "libdaplsoft still mapped after the last dat_ia_close");
    }
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
    return failures ? 1 : 0;
}
