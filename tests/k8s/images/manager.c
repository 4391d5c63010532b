/* A stand-in for the KubeSlice worker-operator, for the real-node tests. Its executable is
 * named `manager`, like the real one, so signal mode finds it through the shared PID
 * namespace. It logs the hub it was started with, once, then answers its own probes:
 * GET /healthz and /readyz on HUB_TEST_PROBE_PORT (default 8081) with 200. The node tests run
 * in a network namespace of their own, so listening on every address there is safe.
 * With HUB_TEST_HANG_ONCE_AFTER=N, the pod's first worker "hangs" N seconds after it
 * starts: /healthz answers 500 from then on. It marks the handoff directory (an emptyDir
 * the pod keeps), so the worker the kubelet starts next is healthy.
 * Built static: the image holds this file alone. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void done(int sig) {
    (void)sig;
    _exit(0);
}

static const char *env_or(const char *name, const char *fallback) {
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

int main(void) {
    signal(SIGTERM, done);
    signal(SIGINT, done);
    signal(SIGPIPE, SIG_IGN);
    printf("worker started: hub=%s token_file=%s pid=%d\n", env_or("HUB_HOST_ENDPOINT", "-"),
           env_or("HUB_TOKEN_FILE", "-"), (int)getpid());
    fflush(stdout);

    time_t hang_at = 0;
    const char *hang = getenv("HUB_TEST_HANG_ONCE_AFTER");
    if (hang && *hang) {
        char mark[512];
        snprintf(mark, sizeof mark, "%s/test-hung-once", env_or("HUB_HANDOFF_DIR", "/tmp"));
        int m = open(mark, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (m >= 0) {
            close(m);
            hang_at = time(NULL) + atoi(hang);
        }
    }

    int port = atoi(env_or("HUB_TEST_PROBE_PORT", "8081"));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port),
                               .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 16) != 0) {
        perror("worker: cannot serve probes");
        return 1;
    }
    static const char ok[] = "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
    static const char missing[] = "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    static const char hung[] = "HTTP/1.0 500 Internal Server Error\r\nContent-Length: 5\r\n\r\nhung\n";
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        char buf[512];
        ssize_t n = read(c, buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = 0;
        int known = strncmp(buf, "GET /healthz", 12) == 0 || strncmp(buf, "GET /readyz", 11) == 0;
        int is_hung = hang_at && time(NULL) >= hang_at && strncmp(buf, "GET /healthz", 12) == 0;
        const char *reply = is_hung ? hung : known ? ok : missing;
        ssize_t w = write(c, reply, strlen(reply));
        (void)w;
        close(c);
    }
}
