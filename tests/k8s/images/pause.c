/* The pod sandbox's pause process: sleeps until SIGTERM or SIGINT, reaps nothing else.
 * Built static so the image needs no libc. */
#include <signal.h>
#include <unistd.h>

static void done(int sig) { (void)sig; _exit(0); }

int main(void) {
    signal(SIGTERM, done);
    signal(SIGINT, done);
    for (;;) pause();
}
