/* Shows the hazard that emu/evlib.c guards against: a host program that
 * exports libevent 1.4's backend names, and a libevent 2.x loaded the
 * ordinary way (global binding, as a DT_NEEDED dependency is). A child
 * process tries to create an event base; prints "captured: ..." when that
 * crashed or failed (libevent bound to the host's tables), "isolated" when
 * it worked. Exit 0 either way; 2 when the probe itself cannot run. */
#include "hostile_host_syms.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int try_base(const char *core)
{
    void *h = dlopen(core, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        fprintf(stderr, "probe: %s\n", dlerror());
        return 2;
    }
    void *(*base_new)(void) = (void *(*)(void))dlsym(h, "event_base_new");
    if (base_new == NULL)
        return 2;
    return base_new() != NULL ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *core = argc > 1 ? argv[1] : "libevent_core-2.1.so.7";
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0) {
        /* No core file for the expected crash. */
        signal(SIGSEGV, SIG_DFL);
        _exit(try_base(core));
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return 2;
    if (WIFSIGNALED(st))
        printf("captured: event_base_new crashed (%s)\n", strsignal(WTERMSIG(st)));
    else if (WEXITSTATUS(st) == 1)
        printf("captured: event_base_new failed\n");
    else if (WEXITSTATUS(st) == 0)
        printf("isolated\n");
    else
        return 2;
    return 0;
}
