/* softdat: turn a dat.conf ia_params string into the IA's address.
 *
 * The first blank-separated word counts (OFA records often append a port
 * number: "127.0.0.1 0"). It may name an interface ("lo", "eth0"), an
 * IPv4/IPv6 literal or a host name. The result must be a local, specified
 * address: peers are told it (dtest sends it over its side channel), so
 * 0.0.0.0 or a remote address would be useless. IPv4 wins over IPv6 for an
 * interface or host name because the OFA test programs need AF_INET. */
#include "lib/provider/ia.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "emu/log.h"

static int is_unspecified(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
    return 1;
}

static socklen_t family_len(int family)
{
    return family == AF_INET ? (socklen_t)sizeof(struct sockaddr_in) : (socklen_t)sizeof(struct sockaddr_in6);
}

static void store(const struct sockaddr *sa, struct sockaddr_storage *out, socklen_t *len)
{
    memset(out, 0, sizeof *out);
    *len = family_len(sa->sa_family);
    memcpy(out, sa, *len);
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)(void *)out)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)(void *)out)->sin6_port = 0;
}

static int same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

/* Rank an interface address: IPv4 first, then global IPv6, then link-local. */
static int rank(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return 3;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr) ? 1 : 2;
    return 0;
}

/* Find `name` as an interface (addr == NULL) or the interface owning addr.
 * Returns 1 and fills out/ifname when found, 0 when not, -1 when the list
 * could not be read (getifaddrs needs a socket and memory: a resource
 * shortage, not a bad name). */
static int scan_interfaces(const char *name, const struct sockaddr *addr, struct sockaddr_storage *out,
                           socklen_t *len, char ifname[IF_NAMESIZE])
{
    struct ifaddrs *list;
    if (getifaddrs(&list) != 0)
        return -1;
    const struct ifaddrs *best = NULL;
    for (const struct ifaddrs *i = list; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || rank(i->ifa_addr) == 0 || is_unspecified(i->ifa_addr))
            continue;
        if (name != NULL) {
            if (strcmp(i->ifa_name, name) == 0 && (best == NULL || rank(i->ifa_addr) > rank(best->ifa_addr)))
                best = i;
        } else if (same_ip(i->ifa_addr, addr)) {
            best = i;
            break;
        }
    }
    if (best != NULL) {
        store(best->ifa_addr, out, len);
        snprintf(ifname, IF_NAMESIZE, "%s", best->ifa_name);
    }
    freeifaddrs(list);
    return best != NULL;
}

/* 127.0.0.0/8 is local on Linux without being listed address by address. */
static int is_v4_loopback(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET &&
           (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
}

int sd_ia_resolve_address(const char *ia_params, struct sockaddr_storage *out, socklen_t *len,
                          char ifname[IF_NAMESIZE])
{
    char word[256];
    ifname[0] = '\0';
    if (ia_params == NULL)
        return -1;
    ia_params += strspn(ia_params, " \t");
    size_t n = strcspn(ia_params, " \t");
    if (n == 0 || n >= sizeof word)
        return -1;
    memcpy(word, ia_params, n);
    word[n] = '\0';

    int sc = scan_interfaces(word, NULL, out, len, ifname);
    if (sc > 0)
        return 0;
    bool short_of_resources = sc < 0;

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int err = getaddrinfo(word, NULL, &hints, &res);
    if (err != 0) {
        if (short_of_resources || err == EAI_MEMORY || err == EAI_SYSTEM) {
            SD_ERR("ia", "cannot resolve \"%s\": out of resources (%s)", word,
                   err == EAI_SYSTEM ? strerror(errno) : gai_strerror(err));
            return -2;
        }
        SD_ERR("ia", "\"%s\" is neither an interface nor a resolvable address: %s", word, gai_strerror(err));
        return -1;
    }
    int found = 0;
    /* Two passes: IPv4 candidates first, then IPv6. */
    for (int pass = 0; pass < 2 && !found; pass++) {
        for (const struct addrinfo *ai = res; ai != NULL && !found; ai = ai->ai_next) {
            if (ai->ai_family != (pass == 0 ? AF_INET : AF_INET6) || is_unspecified(ai->ai_addr))
                continue;
            int r = scan_interfaces(NULL, ai->ai_addr, out, len, ifname);
            if (r > 0) {
                found = 1;
            } else if (is_v4_loopback(ai->ai_addr)) {
                store(ai->ai_addr, out, len);
                found = 1;
            } else if (r < 0) {
                short_of_resources = true;
            }
        }
    }
    freeaddrinfo(res);
    if (!found && short_of_resources) {
        SD_ERR("ia", "cannot check whether \"%s\" is local: out of resources", word);
        return -2;
    }
    if (!found)
        SD_ERR("ia", "\"%s\" does not resolve to an address of this host", word);
    return found ? 0 : -1;
}
