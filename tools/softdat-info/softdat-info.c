/* softdat-info: list the DAT providers the registry knows and show what each
 * interface adapter reports about itself (DAT_IA_ATTR, DAT_PROVIDER_ATTR),
 * in the spirit of ibv_devinfo.
 *
 * It uses only the public DAT API, so it works against any libdat2.so.2
 * (ours or OFA's) and any provider, not only softdat.
 *
 * Exit status: 0 = everything asked for was shown; 1 = a named IA could not
 * be opened, or no IA at all could be opened (or none is registered);
 * 2 = usage error or the registry itself failed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/softdat-info/info.h"

#define EXIT_USAGE 2
/* Queue length of the async EVD the provider creates for us; dtest uses 8. */
#define ASYNC_QLEN 8

static const char *prog = "softdat-info";

static void usage(FILE *out)
{
    fprintf(out,
            "usage: %s [-l] [-v] [-d IA_NAME]... [IA_NAME]...\n"
            "List the DAT providers registered in dat.conf and show the attributes\n"
            "of each interface adapter (IA).\n"
            "\n"
            "  -l, --list         only list the registered IAs, open none\n"
            "  -d, --ia NAME      show only this IA (repeatable; same as a positional NAME)\n"
            "  -v, --verbose      also show the dat.conf in use, every registry record\n"
            "                     and the full EVD stream-merging matrix\n"
            "  -V, --version      print the version and exit\n"
            "  -h, --help         show this help\n"
            "\n"
            "The registry reads $DAT_OVERRIDE if set, else /etc/dat.conf; softdat's\n"
            "registry then adds the IAs of its own PREFIX/etc/dat.conf.\n"
            "Exit status: 0 success, 1 an IA could not be opened (a named one, or\n"
            "every one), 2 usage or registry error.\n",
            prog);
}

static void short_usage(void)
{
    fprintf(stderr,
            "usage: %s [-l] [-v] [-d IA_NAME]... [IA_NAME]...\n"
            "Try '%s --help' for the options, or see softdat-info(1).\n",
            prog, prog);
}

static const char *thread_text(DAT_BOOLEAN ts)
{
    return ts == DAT_TRUE ? "threadsafe" : "nonthreadsafe";
}

/* The registry's records, sized with the spec's (0, &n, NULL) probe. The
 * count may change between calls (another thread may add a provider), so
 * retry a few times rather than trust one snapshot. */
static DAT_RETURN list_providers(DAT_PROVIDER_INFO **out, DAT_COUNT *count)
{
    DAT_PROVIDER_INFO *infos = NULL;
    DAT_PROVIDER_INFO **ptrs = NULL;
    DAT_COUNT n = 0, got = 0;
    DAT_RETURN ret;

    for (int attempt = 0; attempt < 4; attempt++) {
        n = 0;
        ret = dat_registry_list_providers(0, &n, NULL);
        if (n <= 0) {
            /* A failure that is not the sizing idiom (e.g. no dat.conf). */
            if (ret != DAT_SUCCESS && DAT_GET_TYPE(ret) != DAT_INVALID_PARAMETER)
                return ret;
            *out = NULL;
            *count = 0;
            return DAT_SUCCESS;
        }
        n += 4;
        free(infos);
        free(ptrs);
        infos = calloc((size_t)n, sizeof(*infos));
        ptrs = calloc((size_t)n, sizeof(*ptrs));
        if (infos == NULL || ptrs == NULL) {
            free(infos);
            free(ptrs);
            return DAT_INSUFFICIENT_RESOURCES;
        }
        for (DAT_COUNT i = 0; i < n; i++)
            ptrs[i] = &infos[i];
        got = 0;
        ret = dat_registry_list_providers(n, &got, ptrs);
        if (ret == DAT_SUCCESS && got <= n)
            break;
    }
    free(ptrs);
    if (ret != DAT_SUCCESS) {
        free(infos);
        return ret;
    }
    *out = infos;
    *count = got;
    return DAT_SUCCESS;
}

static const DAT_PROVIDER_INFO *find_record(const DAT_PROVIDER_INFO *infos, DAT_COUNT n,
                                            const char *name)
{
    for (DAT_COUNT i = 0; i < n; i++)
        if (strncmp(infos[i].ia_name, name, DAT_NAME_MAX_LENGTH) == 0)
            return &infos[i];
    return NULL;
}

/* Opens, queries, prints and closes one IA. Returns 0 if it could be opened. */
static int show_ia(const char *name, const DAT_PROVIDER_INFO *rec, int verbose)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr;
    DAT_PROVIDER_ATTR prov_attr;
    DAT_UINT32 major = DAT_VERSION_MAJOR, minor = DAT_VERSION_MINOR;
    DAT_BOOLEAN ts = DAT_FALSE;
    DAT_RETURN ret;
    char err[256];

    /* Open with the record's own key: the registry matches name, version
     * and thread safety exactly, so a "threadsafe"-only entry would not
     * open with the consumer defaults. */
    if (rec != NULL) {
        major = rec->dapl_version_major;
        minor = rec->dapl_version_minor;
        ts = rec->is_thread_safe;
    }
    printf("ia_name: %s\n", name);
    fflush(stdout);
    /* DAT_NAME_PTR is a non-const char *; the registry does not write it. */
    char *name_arg = strdup(name);
    ret = name_arg ? dat_ia_openv(name_arg, ASYNC_QLEN, &async_evd, &ia, major, minor, ts)
                   : DAT_INSUFFICIENT_RESOURCES;
    free(name_arg);
    if (ret != DAT_SUCCESS) {
        /* The reason goes to stderr only, once. */
        printf("    (cannot be opened)\n\n");
        fflush(stdout);
        fprintf(stderr, "%s: %s: dat_ia_open: %s\n", prog, name,
                info_strerror(ret, err, sizeof(err)));
        return -1;
    }
    info_line("api:", "u%u.%u %s", (unsigned)major, (unsigned)minor, thread_text(ts));

    memset(&ia_attr, 0, sizeof(ia_attr));
    memset(&prov_attr, 0, sizeof(prov_attr));
    ret = dat_ia_query(ia, &async_evd, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL,
                       &prov_attr);
    if (ret != DAT_SUCCESS) {
        fprintf(stderr, "%s: %s: dat_ia_query: %s\n", prog, name,
                info_strerror(ret, err, sizeof(err)));
    } else {
        /* Print before closing: the attribute strings belong to the IA. */
        info_print_ia_attr(&ia_attr, verbose);
        printf("  provider:\n");
        info_print_provider_attr(&prov_attr, verbose);
    }
    putchar('\n');
    fflush(stdout);

    DAT_RETURN cret = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
    if (cret != DAT_SUCCESS) {
        fprintf(stderr, "%s: %s: dat_ia_close (graceful): %s; closing abruptly\n", prog,
                name, info_strerror(cret, err, sizeof(err)));
        cret = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        if (cret != DAT_SUCCESS)
            fprintf(stderr, "%s: %s: dat_ia_close (abrupt): %s\n", prog, name,
                    info_strerror(cret, err, sizeof(err)));
    }
    /* The IA opened, so it counts as shown even if query or close failed;
     * those are reported above and make the run fail. */
    return (ret == DAT_SUCCESS && cret == DAT_SUCCESS) ? 0 : -2;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "list", no_argument, NULL, 'l' },
        { "ia", required_argument, NULL, 'd' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    const char **names;
    int nnames = 0, list_only = 0, verbose = 0, opt;
    DAT_PROVIDER_INFO *infos = NULL;
    DAT_COUNT count = 0;
    DAT_RETURN ret;
    char err[256];

    if (argc > 0 && argv[0] != NULL && strrchr(argv[0], '/') != NULL)
        prog = strrchr(argv[0], '/') + 1;
    else if (argc > 0 && argv[0] != NULL)
        prog = argv[0];

    names = calloc((size_t)argc + 1, sizeof(*names));
    if (names == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_USAGE;
    }
    while ((opt = getopt_long(argc, argv, "ld:vVh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'l': list_only = 1; break;
        case 'd': names[nnames++] = optarg; break;
        case 'v': verbose++; break;
        case 'h': usage(stdout); free(names); return 0;
        case 'V': printf("%s (softdat) %s\n", prog, SOFTDAT_VERSION); free(names); return 0;
        default: short_usage(); free(names); return EXIT_USAGE;
        }
    }
    for (int i = optind; i < argc; i++)
        names[nnames++] = argv[i];

    ret = list_providers(&infos, &count);
    if (ret != DAT_SUCCESS) {
        fprintf(stderr, "%s: dat_registry_list_providers: %s\n", prog,
                info_strerror(ret, err, sizeof(err)));
        free(names);
        return EXIT_USAGE;
    }

    if (verbose) {
        const char *conf = getenv("DAT_OVERRIDE");
        if (conf && *conf)
            printf("dat.conf: %s (DAT_OVERRIDE)\n", conf);
        else
            printf("dat.conf: /etc/dat.conf (softdat's registry also adds its PREFIX/etc/dat.conf)\n");
    }
    int distinct = 0;
    for (DAT_COUNT i = 0; i < count; i++)
        if (find_record(infos, i, infos[i].ia_name) == NULL)
            distinct++;
    printf("registered IAs: %d (%d dat.conf records)\n", distinct, (int)count);
    for (DAT_COUNT i = 0; i < count; i++) {
        /* Without -v, one line per IA name: the threadsafe and nonthreadsafe
         * records of one IA are the same adapter. */
        if (!verbose && find_record(infos, i, infos[i].ia_name) != NULL)
            continue;
        printf("    %-30.*s u%u.%u  %s\n", DAT_NAME_MAX_LENGTH, infos[i].ia_name,
               (unsigned)infos[i].dapl_version_major, (unsigned)infos[i].dapl_version_minor,
               thread_text(infos[i].is_thread_safe));
    }
    putchar('\n');
    fflush(stdout);

    int status = 0;
    if (list_only) {
        /* Named IAs must at least be registered. */
        for (int i = 0; i < nnames; i++)
            if (find_record(infos, count, names[i]) == NULL) {
                fprintf(stderr, "%s: %s: not registered\n", prog, names[i]);
                status = 1;
            }
        if (count == 0) {
            fprintf(stderr, "%s: no DAT providers registered\n", prog);
            status = 1;
        }
    } else if (nnames > 0) {
        for (int i = 0; i < nnames; i++)
            if (show_ia(names[i], find_record(infos, count, names[i]), verbose) != 0)
                status = 1;
    } else {
        int opened = 0, failed_after_open = 0;
        for (DAT_COUNT i = 0; i < count; i++) {
            if (find_record(infos, i, infos[i].ia_name) != NULL)
                continue; /* shown already under its first record */
            int r = show_ia(infos[i].ia_name, &infos[i], verbose);
            if (r != -1)
                opened++;
            if (r == -2)
                failed_after_open = 1;
        }
        if (opened == 0) {
            fprintf(stderr, "%s: %s\n", prog,
                    count == 0 ? "no DAT providers registered"
                               : "no interface adapter could be opened");
            status = 1;
        } else if (failed_after_open) {
            status = 1;
        }
    }
    free(infos);
    free(names);
    return status;
}
